// tests/server's fixtures: the demo program's profile and addresses, a live in-process server, `fxprof load`
// as a background process, and reading what profiler-cli saw (server_test.cpp and load_test.cpp).
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "base/fd.h"
#include "base/url.h"
#include "passes/symbolicate.h"
#include "server/server.h"
#include "tests/e2e/e2e.h"  // function_handle
#include "tests/support/support.h"
#undef p_type  // <resolv.h> (through httplib.h) renames it, and Elf64_Phdr needs it

namespace fxprof::test::server_fixtures {

using namespace fxprof;
using namespace fxprof::test;

constexpr uint64_t kLibStart = 0x555555554000;  // where we pretend fxprof_srv_demo was mapped (offset 0)

inline std::string demo_path() { return test_program("fxprof_srv_demo"); }

inline void write_text(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
}

// The GNU build ID of an ELF file, lowercase hex (from its PT_NOTE segments).
inline std::string build_id(const std::string& path) {
  auto data = read_file(path);
  REQUIRE(data.ok());
  const std::string& d = *data;
  REQUIRE(d.size() > sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, d.data(), sizeof eh);
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, d.data() + eh.e_phoff + static_cast<size_t>(i) * eh.e_phentsize, sizeof ph);
    if (ph.p_type != PT_NOTE) continue;
    size_t off = ph.p_offset, end = ph.p_offset + ph.p_filesz;
    while (off + 12 <= end) {
      uint32_t namesz, descsz, type;
      std::memcpy(&namesz, d.data() + off, 4);
      std::memcpy(&descsz, d.data() + off + 4, 4);
      std::memcpy(&type, d.data() + off + 8, 4);
      size_t name_off = off + 12, desc_off = name_off + ((namesz + 3) & ~3u);
      if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(d.data() + name_off, "GNU", 4) == 0) {
        std::string hex;
        char b[3];
        for (uint32_t k = 0; k < descsz; ++k) {
          std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(d[desc_off + k]));
          hex += b;
        }
        return hex;
      }
      off = desc_off + ((descsz + 3) & ~3u);
    }
  }
  FAIL("no build ID in " << path);
  return {};
}

// Breakpad ID: the first 16 bytes as a GUID (first three fields byte-swapped), uppercase, age 0.
inline std::string breakpad_id(const std::string& build_id_hex) {
  std::string b = build_id_hex.substr(0, 32);
  auto byte = [&](int i) { return b.substr(static_cast<size_t>(i) * 2, 2); };
  std::string out = byte(3) + byte(2) + byte(1) + byte(0) + byte(5) + byte(4) + byte(7) + byte(6);
  for (int i = 8; i < 16; ++i) out += byte(i);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out + "0";
}

struct Sym {
  uint64_t addr = 0, size = 0;
};
inline std::map<std::string, Sym> symbols_of(const std::string& path) {
  auto r = run({"nm", "-S", "--defined-only", path});
  REQUIRE(r.status == 0);
  std::map<std::string, Sym> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, s, t, name;
    if (!(ls >> a >> s >> t >> name)) continue;
    out[name] = Sym{std::stoull(a, nullptr, 16), std::stoull(s, nullptr, 16)};
  }
  return out;
}

inline std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// Addresses in fxprof_srv_demo the tests use, as lib-relative offsets.
struct DemoAddrs {
  uint64_t main_caller, outer_caller, second_start, hot_inlined, first_start;
};

inline DemoAddrs demo_addrs() {
  static DemoAddrs cached = [] {
    auto syms = symbols_of(demo_path());
    for (const char* n : {"main", "outer_work", "first_fn", "second_fn", "compute_hot"}) {
      INFO(n);
      REQUIRE(syms.count(n));
    }
    // The layout the nudging test relies on (see srv_demo.cpp).
    REQUIRE(syms["first_fn"].addr + syms["first_fn"].size == syms["second_fn"].addr);
    DemoAddrs d{};
    d.main_caller = syms["main"].addr + 5;
    d.outer_caller = syms["outer_work"].addr + 5;
    d.second_start = syms["second_fn"].addr;
    d.first_start = syms["first_fn"].addr;
    // An address of compute_hot where inlined_helper's code is, found with the symbolizer itself.
    symbolizer::Symbolizer sym;
    std::string bid = breakpad_id(build_id(demo_path()));
    sym.add_known_lib({"fxprof_srv_demo", bid, "fxprof_srv_demo", demo_path(), demo_path(),
                       build_id(demo_path()), "x86_64"});
    std::vector<uint64_t> addrs;
    for (uint64_t a = syms["compute_hot"].addr; a < syms["compute_hot"].addr + syms["compute_hot"].size; ++a)
      addrs.push_back(a);
    auto r = sym.lookup("fxprof_srv_demo", bid, addrs);
    REQUIRE(r.ok());
    for (size_t i = 0; i < addrs.size() && !d.hot_inlined; ++i) {
      if (!(*r)[i].inlines.empty() && (*r)[i].inlines[0].function == "inlined_helper")
        d.hot_inlined = addrs[i];
    }
    REQUIRE(d.hot_inlined != 0);
    return d;
  }();
  return cached;
}

// A small valid Gecko v36 profile of fxprof_srv_demo: main -> outer_work -> [second_fn start as a caller] ->
// compute_hot/inlined_helper (2 samples), and the second_fn start as a leaf (1 sample); optionally a marker
// whose backtrace is the compute_hot stack.
// Symbolication of a file goes through the model now (passes/); the server only serves.
inline fxprof::Status symbolicate_file(const std::string& in, const std::string& out) {
  symbolizer::Symbolizer symbols;
  return fxprof::passes::symbolicate_file(in, out, symbols);
}

inline std::string demo_profile(bool with_marker_stack = false) {
  DemoAddrs d = demo_addrs();
  std::string bid = build_id(demo_path());
  std::string path = demo_path();
  auto abs = [&](uint64_t rel) { return "\"" + hex(kLibStart + rel) + "\""; };
  std::string markers =
      with_marker_stack
          ? R"([[4,1.5,null,0,0,{"type":"Demo","stack":{"samples":{"schema":{"stack":0,"time":1},"data":[[3,1.5]]}}}]])"
          : "[]";
  return std::string(R"({"meta":{"version":36,"interval":1,"startTime":1700000000000,"shutdownTime":null,)") +
         R"("processType":0,"product":"fxprof_srv_demo","stackwalk":1,"debug":0,"presymbolicated":false,)" +
         R"("sampleUnits":{"time":"ms","eventDelay":"ms","threadCPUDelta":"µs"},)" +
         R"("categories":[{"name":"Other","color":"grey","subcategories":["Other"]},)" +
         R"({"name":"User","color":"yellow","subcategories":["Other"]}],"markerSchema":[]},)" +
         R"("libs":[{"start":)" + std::to_string(kLibStart) + R"(,"end":)" +
         std::to_string(kLibStart + 0x100000) + R"(,"offset":0,"name":"fxprof_srv_demo","path":")" + path +
         R"(","debugName":"fxprof_srv_demo",)" + R"("debugPath":")" + path + R"(","breakpadId":")" +
         breakpad_id(bid) + R"(","codeId":")" + bid +
         R"(","arch":"x86_64"}],"pausedRanges":[],"processes":[],)" +
         R"("sources":{"schema":{"id":0,"filename":1,"startLine":2,"startColumn":3,"sourceMapURL":4},"data":[]},)" +
         R"("threads":[{"name":"GeckoMain","processName":"fxprof_srv_demo","processType":"default","pid":4242,)" +
         R"("tid":4242,"registerTime":0,"unregisterTime":null,)" +
         R"("samples":{"schema":{"stack":0,"time":1,"eventDelay":2,"threadCPUDelta":3},)" +
         R"("data":[[3,10,0,1000],[3,11,0,1000],[2,12,0,1000]]},)" +
         R"("markers":{"schema":{"name":0,"startTime":1,"endTime":2,"phase":3,"category":4,"data":5},"data":)" +
         markers + "}," +
         R"("stackTable":{"schema":{"prefix":0,"frame":1},"data":[[null,0],[0,1],[1,2],[2,3]]},)" +
         R"("frameTable":{"schema":{"location":0,"relevantForJS":1,"innerWindowID":2,"implementation":3,)" +
         R"("line":4,"column":5,"category":6,"subcategory":7},"data":[[0,false,0,null,null,null,1,0],)" +
         R"([1,false,0,null,null,null,1,0],[2,false,0,null,null,null,1,0],[3,false,0,null,null,null,1,0]]},)" +
         R"("stringTable":[)" + abs(d.main_caller) + "," + abs(d.outer_caller) + "," + abs(d.second_start) +
         "," + abs(d.hot_inlined) + R"(,"DemoMarker"]}]})";
}

// A symbolication request as the front end sends it for the demo.
inline std::string symbolicate_request(const std::vector<uint64_t>& rel) {
  std::string s = R"({"jobs":[{"memoryMap":[["fxprof_srv_demo",")" + breakpad_id(build_id(demo_path())) +
                  R"("]],"stacks":[[)";
  for (size_t i = 0; i < rel.size(); ++i)
    s += (i ? "," : "") + std::string("[0,") + std::to_string(rel[i]) + "]";
  return s + "]]}]}";
}

// An in-process server on a free port, stopped at scope exit.
struct LiveServer {
  symbolizer::Symbolizer symbols;
  std::unique_ptr<server::ProfileServer> server;
  explicit LiveServer(const std::string& profile) {
    auto info = server::inspect_profile(profile);
    REQUIRE(info.ok());
    for (auto& l : info->libs) symbols.add_known_lib(l);
    server::ProfileServer::Config c;
    c.profile_path = profile;
    c.port = 0;
    auto s = server::ProfileServer::start(c, symbols);
    REQUIRE(s.ok());
    server = std::move(*s);
  }
  ~LiveServer() { server->stop(); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_connection_timeout(5);
    c.set_read_timeout(30);
    c.set_write_timeout(30);
    return c;
  }
  std::string path(const std::string& p) const { return "/" + server->token() + p; }
};

// `fxprof load` as a child process: started, its profiler URL read from stdout, stopped with a signal.
// `fxprof load ARGS...` running in the background (the support library's Background).
class LoadProcess : public Background {
 public:
  explicit LoadProcess(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {})
      : Background(argv_for(args), options_for(env)) {}
  // Reads stdout until a line with the profiler URL (or EOF / timeout); returns the URL or "".
  std::string wait_for_url() {
    const std::string pre = "https://profiler.firefox.com/from-url/";
    std::string line = wait_for_line(pre, std::chrono::seconds(20));
    auto at = line.find(pre);
    return at == std::string::npos ? std::string() : line.substr(at);
  }
  int stop(int sig = SIGTERM) { return Background::stop(sig, std::chrono::seconds(10)); }

 private:
  static std::vector<std::string> argv_for(const std::vector<std::string>& args) {
    std::vector<std::string> argv{fxprof_bin(), "load"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  static CmdOptions options_for(const std::map<std::string, std::string>& env) {
    CmdOptions o;
    o.env = env;
    return o;
  }
};

// "https://profiler.firefox.com/from-url/<enc>/?symbolServer=<enc>[&view state]" -> {profile URL, symbol
// server}.
inline std::pair<std::string, std::string> split_profiler_url(const std::string& url) {
  const std::string pre = "https://profiler.firefox.com/from-url/";
  REQUIRE(url.rfind(pre, 0) == 0);
  auto slash = url.find("/?symbolServer=", pre.size());
  REQUIRE(slash != std::string::npos);
  const size_t from = slash + std::strlen("/?symbolServer=");
  return {url_decode(url.substr(pre.size(), slash - pre.size())),
          url_decode(url.substr(from, url.find('&', from) - from))};
}

inline bool have_profiler_cli() { return ::access(ProfilerCli::binary().c_str(), X_OK) == 0; }

// Function names of the call paths of a baked profile's samples, root first: "a;b;c" per sample.
inline std::vector<std::string> sample_paths(const std::string& json, bool in_child_process = false) {
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, json);
  auto t = in_child_process ? doc["processes"].at(0)["threads"].at(0) : doc["threads"].at(0);
  std::vector<std::string> strings;
  for (auto s : t["stringTable"].get_array()) strings.emplace_back(std::string_view(s));
  std::vector<std::string> frame_names;
  for (auto f : t["frameTable"]["data"].get_array()) frame_names.push_back(strings[int64_t(f.at(0))]);
  std::vector<std::pair<int64_t, int64_t>> stacks;
  int64_t i = 0;
  for (auto s : t["stackTable"]["data"].get_array()) {
    auto p = s.at(0);
    int64_t prefix = p.is_null() ? -1 : int64_t(p);
    REQUIRE(prefix < i);  // topological
    stacks.emplace_back(prefix, int64_t(s.at(1)));
    ++i;
  }
  std::vector<std::string> out;
  for (auto row : t["samples"]["data"].get_array()) {
    std::vector<std::string> names;
    for (int64_t s = int64_t(row.at(0)); s >= 0; s = stacks[static_cast<size_t>(s)].first)
      names.push_back(frame_names[static_cast<size_t>(stacks[static_cast<size_t>(s)].second)]);
    std::string joined;
    for (auto it = names.rbegin(); it != names.rend(); ++it) joined += (joined.empty() ? "" : ";") + *it;
    out.push_back(joined);
  }
  return out;
}

}  // namespace fxprof::test::server_fixtures
