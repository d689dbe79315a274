// The server, for real: HTTP against a running server (in-process on its own threads, and `fxprof load` as a
// child process), presymbolication checked frame by frame, and the Firefox Profiler's own import and
// symbolication code (profiler-cli) loading from our server, through --with-samply, and from a baked profile.
#include "server/server.h"

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
#include "pipeline/symbolicate.h"
#include "tests/e2e/e2e.h"  // function_handle
#include "tests/support/support.h"

#undef p_type  // <resolv.h> (through httplib.h) renames it, and Elf64_Phdr needs it

using namespace fxprof;
using namespace fxprof::test;

namespace {

constexpr uint64_t kLibStart = 0x555555554000;  // where we pretend fxprof_srv_demo was mapped (offset 0)

std::string demo_path() { return test_program("fxprof_srv_demo"); }

void write_text(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
}

// The GNU build ID of an ELF file, lowercase hex (from its PT_NOTE segments).
std::string build_id(const std::string& path) {
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
std::string breakpad_id(const std::string& build_id_hex) {
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
std::map<std::string, Sym> symbols_of(const std::string& path) {
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

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// Addresses in fxprof_srv_demo the tests use, as lib-relative offsets.
struct DemoAddrs {
  uint64_t main_caller, outer_caller, second_start, hot_inlined, first_start;
};

DemoAddrs demo_addrs() {
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
// Symbolication of a file goes through the model now (pipeline/); the server only serves.
fxprof::Status symbolicate_file(const std::string& in, const std::string& out) {
  symbolizer::Symbolizer symbols;
  return fxprof::pipeline::symbolicate_file(in, out, symbols);
}

std::string demo_profile(bool with_marker_stack = false) {
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
std::string symbolicate_request(const std::vector<uint64_t>& rel) {
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
std::pair<std::string, std::string> split_profiler_url(const std::string& url) {
  const std::string pre = "https://profiler.firefox.com/from-url/";
  REQUIRE(url.rfind(pre, 0) == 0);
  auto slash = url.find("/?symbolServer=", pre.size());
  REQUIRE(slash != std::string::npos);
  const size_t from = slash + std::strlen("/?symbolServer=");
  return {url_decode(url.substr(pre.size(), slash - pre.size())),
          url_decode(url.substr(from, url.find('&', from) - from))};
}

bool have_profiler_cli() { return ::access(ProfilerCli::binary().c_str(), X_OK) == 0; }

// Function names of the call paths of a baked profile's samples, root first: "a;b;c" per sample.
std::vector<std::string> sample_paths(const std::string& json, bool in_child_process = false) {
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

}  // namespace

// ---------------------------------------------------------------------------------------------------------

TEST_CASE("profiler URL encodes the profile and symbol server URLs like samply", "[server]") {
  ::unsetenv("PROFILER_URL");
  CHECK(server::firefox_profiler_url("http://127.0.0.1:3000/abc/profile.json", "http://127.0.0.1:3000/abc") ==
        "https://profiler.firefox.com/from-url/http%3A%2F%2F127.0.0.1%3A3000%2Fabc%2Fprofile.json/"
        "?symbolServer=http%3A%2F%2F127.0.0.1%3A3000%2Fabc");
  // The front end's view state follows as it is (gecko::gecko_view_query).
  CHECK(
      server::firefox_profiler_url("http://h/p.json", "http://h", "thread=c") ==
      "https://profiler.firefox.com/from-url/http%3A%2F%2Fh%2Fp.json/?symbolServer=http%3A%2F%2Fh&thread=c");
  CHECK(fxprof::url_encode("a b\n%?#&=") == "a%20b%0A%25%3F%23%26%3D");
}

TEST_CASE("a processed-format gzip bomb is refused by load with the Gecko reader's cap", "[server][cli]") {
  TempDir dir;
  // 24 MB of short values that gzip packs ~1000x: past the 200x cap long before it is whole.
  std::string text = R"({"meta":{"preprocessedProfileVersion":48,"version":30},"libs":[],"pad":["x")";
  while (text.size() < (24u << 20)) text += ",\"x\"";
  text += "]}";
  write_text(dir.file("bomb.json.gz"), gzip_text(text));
  text = std::string();
  auto info = server::inspect_profile(dir.file("bomb.json.gz"));
  REQUIRE_FALSE(info.ok());
  CHECK_THAT(info.error(), Catch::Contains("bomb.json.gz: gzip data inflates beyond 200x its size"));
  auto r = run({fxprof_bin(), "load", "--no-open", "-P", "0", dir.file("bomb.json.gz")});
  CHECK(r.status != 0);
  CHECK_THAT(r.err, Catch::Contains("gzip data inflates beyond 200x its size"));
  CHECK(r.out.empty());  // no URL: nothing is served
}

TEST_CASE("tokens are 39 random base32 characters", "[server]") {
  std::string a = server::random_token(), b = server::random_token();
  CHECK(a.size() == 39);
  CHECK(a != b);
  CHECK(a.find_first_not_of("0123456789abcdfghijklmnpqrsvwxyz") == std::string::npos);
}

TEST_CASE("corrupt, truncated, empty and non-profile files give one clear error", "[server]") {
  TempDir dir;
  std::string good = demo_profile();
  std::string gz = gzip_text(good);
  struct Case {
    std::string name, content, expected;
  };
  std::vector<Case> cases = {
      {"empty.json", "", "empty.json: empty file"},
      {"text.json", "hello, world\n", "text.json: not a profile (neither JSON nor gzip)"},
      {"array.json", "[1,2,3]", "array.json: not a profile (neither JSON nor gzip)"},
      {"other.json", R"({"traceEvents":[]})",
       "other.json: not a Firefox Profiler profile (no \"meta\" object)"},
      {"cut.json", good.substr(0, good.size() / 2), "cut.json: truncated JSON"},
      {"cut.json.gz", gz.substr(0, gz.size() / 2), "cut.json.gz: truncated gzip data"},
      {"bad.json.gz", gz.substr(0, 10) + std::string(gz.size() - 10, '\x55'),
       "bad.json.gz: corrupt gzip data"},
      {"empty.json.gz", gzip_text(""), "empty.json.gz: empty file"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    write_text(dir.file(c.name), c.content);
    auto r = server::inspect_profile(dir.file(c.name));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains(c.expected));
    CHECK(r.error().find('\n') == std::string::npos);
  }
  auto missing = server::inspect_profile(dir.file("nope.json"));
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error(), Catch::Contains("nope.json"));

  write_text(dir.file("good.json.gz"), gz);
  auto ok = server::inspect_profile(dir.file("good.json.gz"));
  REQUIRE(ok.ok());
  CHECK(ok->gzip);
  REQUIRE(ok->libs.size() == 1);
  CHECK(ok->libs[0].debug_name == "fxprof_srv_demo");
  CHECK(ok->libs[0].path == demo_path());
  CHECK(ok->has_local_paths);
}

TEST_CASE("fxprof load refuses bad input with one line and serves nothing", "[server][cli]") {
  TempDir dir;
  write_text(dir.file("trunc.json.gz"), gzip_text(demo_profile()).substr(0, 100));
  write_text(dir.file("empty.json"), "");
  for (const char* name : {"trunc.json.gz", "empty.json", "missing.json"}) {
    INFO(name);
    auto r = run({fxprof_bin(), "load", "--no-open", "-P", "0", dir.file(name)},
                 {.timeout = std::chrono::seconds(20)});
    CHECK(r.status != 0);
    CHECK_FALSE(r.timed_out);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("fxprof: " + dir.file(name)));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  auto usage = run({fxprof_bin(), "load"}, {.timeout = std::chrono::seconds(20)});
  CHECK(usage.status == 2);
  auto help = run({fxprof_bin(), "load", "--help"}, {.timeout = std::chrono::seconds(20)});
  CHECK(help.status == 0);
  CHECK_THAT(help.out, Catch::Contains("--no-open"));
}

TEST_CASE("fxprof load refuses what report refuses, with the same line, and serves nothing",
          "[server][cli]") {
  // load used to serve from the profile's head: a file cut in its samples, with trailing garbage or a stack
  // table with a cycle was served (and the front end failed on it) where every other command refused it.
  TempDir dir;
  const std::string good = demo_profile();
  const size_t cut = good.find("\"samples\":");
  REQUIRE(cut != std::string::npos);
  write_text(dir.file("cut.json"), good.substr(0, cut + 20));
  write_text(dir.file("trailing.json"), good + " and more");
  const size_t table = good.find("\"stackTable\":");
  const size_t data = good.find("\"data\":[[", table);
  REQUIRE(data != std::string::npos);
  std::string cycle = good;  // the first stack's prefix: a stack after it
  cycle.replace(data + 9, good.find(',', data + 9) - (data + 9), "1");
  write_text(dir.file("cycle.json"), cycle);
  for (const char* name : {"cut.json", "trailing.json", "cycle.json"}) {
    INFO(name);
    auto report = run({fxprof_bin(), "report", dir.file(name)}, {.timeout = std::chrono::seconds(60)});
    CHECK(report.status == 1);
    auto load = run({fxprof_bin(), "load", "--no-open", "-P", "0", dir.file(name)},
                    {.timeout = std::chrono::seconds(60)});
    CHECK(load.status == 1);
    CHECK(load.out.empty());
    CHECK_THAT(load.err, Catch::StartsWith("fxprof: " + dir.file(name) + ": "));
    CHECK(load.err == report.err);
  }
}

TEST_CASE("the server answers only under its token, with CORS and preflights", "[server][http]") {
  TempDir dir;
  std::string profile = demo_profile();
  write_text(dir.file("p.json"), profile);
  LiveServer live(dir.file("p.json"));
  auto cli = live.client();

  SECTION("the profile under the token, with CORS") {
    auto r = cli.Get(live.path("/profile.json"));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == profile);
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    CHECK_THAT(r->get_header_value("Content-Type"), Catch::StartsWith("application/json"));
  }
  SECTION("404 without the token, with a wrong token, or for unknown paths") {
    for (std::string p : {std::string("/profile.json"), std::string("/symbolicate/v5"),
                          "/" + server::random_token() + "/profile.json", live.path("/nothing"),
                          "/" + live.server->token() + "profile.json"}) {
      INFO(p);
      auto r = cli.Get(p);
      REQUIRE(r);
      CHECK(r->status == 404);
      CHECK(r->body.find(profile.substr(0, 40)) == std::string::npos);
    }
    auto post = cli.Post("/symbolicate/v5", symbolicate_request({0x1000}), "application/json");
    REQUIRE(post);
    CHECK(post->status == 404);
    CHECK_FALSE(post->has_header("Access-Control-Allow-Origin"));
    auto root = cli.Get("/");
    REQUIRE(root);
    CHECK(root->status == 200);
    CHECK_THAT(root->body, Catch::Contains("fxprof"));
    CHECK(root->body.find(live.server->token()) == std::string::npos);
  }
  SECTION("OPTIONS preflight") {
    httplib::Headers h = {{"Origin", "https://profiler.firefox.com"},
                          {"Access-Control-Request-Method", "POST"},
                          {"Access-Control-Request-Headers", "user-agent,content-type"}};
    auto r = cli.Options(live.path("/symbolicate/v5").c_str(), h);
    REQUIRE(r);
    CHECK(r->status == 204);
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    CHECK(r->get_header_value("Access-Control-Allow-Methods") == "POST, GET, OPTIONS");
    CHECK(r->get_header_value("Access-Control-Allow-Headers") == "user-agent,content-type");
    CHECK(r->get_header_value("Access-Control-Max-Age") == "86400");
  }
  SECTION("symbolication works and is CORS-enabled") {
    DemoAddrs d = demo_addrs();
    auto r = cli.Post(live.path("/symbolicate/v5"), symbolicate_request({d.hot_inlined, d.second_start}),
                      "text/plain;charset=UTF-8");
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    CHECK_THAT(r->body, Catch::Contains("compute_hot"));
    CHECK_THAT(r->body, Catch::Contains("inlined_helper"));
    CHECK_THAT(r->body, Catch::Contains("second_fn"));
  }
  SECTION("malformed JSON: 400 with an error object") {
    for (const char* body : {"{\"jobs\": [", "not json", "[1,2]"}) {
      INFO(body);
      auto r = cli.Post(live.path("/symbolicate/v5"), body, "application/json");
      REQUIRE(r);
      CHECK(r->status == 400);
      CHECK_THAT(r->body, Catch::Contains("\"error\""));
      CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    }
  }
  SECTION("bodies over 16 MiB: 413, and the server keeps serving") {
    std::string big(17u << 20, ' ');
    big[0] = '{';
    auto r = cli.Post(live.path("/symbolicate/v5"), big, "application/json");
    REQUIRE(r);
    CHECK(r->status == 413);
    auto again = live.client().Get(live.path("/profile.json"));
    REQUIRE(again);
    CHECK(again->status == 200);
  }
  SECTION("/source/v1 refuses files the debug info does not name") {
    DemoAddrs d = demo_addrs();
    std::string bid = breakpad_id(build_id(demo_path()));
    for (std::string file : {"/etc/passwd", "../../../../etc/passwd", "/proc/self/environ"}) {
      INFO(file);
      std::string req = R"({"debugName":"fxprof_srv_demo","debugId":")" + bid + R"(","moduleOffset":")" +
                        hex(d.hot_inlined) + R"(","file":")" + file + R"("})";
      auto r = cli.Post(live.path("/source/v1"), req, "application/json");
      REQUIRE(r);
      CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
      CHECK((r->status != 200 || r->body.find("\"error\"") != std::string::npos));
      CHECK(r->body.find("root:") == std::string::npos);
    }
  }
}

TEST_CASE("100 parallel symbolication requests are all answered", "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), demo_profile());
  LiveServer live(dir.file("p.json"));
  DemoAddrs d = demo_addrs();
  std::string req = symbolicate_request({d.hot_inlined, d.second_start, d.outer_caller, d.main_caller});
  std::atomic<int> ok{0};
  std::mutex mu;
  std::map<std::string, int> failures;
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&] {
      auto cli = live.client();
      auto t0 = std::chrono::steady_clock::now();
      auto r = cli.Post(live.path("/symbolicate/v5"), req, "text/plain;charset=UTF-8");
      if (r && r->status == 200 && r->body.find("outer_work") != std::string::npos) {
        ++ok;
        return;
      }
      std::lock_guard lock(mu);
      ++failures[r ? "status " + std::to_string(r->status) + ": " + r->body.substr(0, 200)
                   : "error " + httplib::to_string(r.error()) + " after " +
                         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - t0)
                                            .count()) +
                         " ms"];
    });
  }
  for (auto& t : threads) t.join();
  for (auto& [what, n] : failures) UNSCOPED_INFO(n << " x " << what);
  CHECK(ok == 100);
}

TEST_CASE("a .json.gz profile is served as it is, with Content-Encoding: gzip (curl)", "[server][http]") {
  TempDir dir;
  std::string gz = gzip_text(demo_profile());
  write_text(dir.file("p.json.gz"), gz);
  LiveServer live(dir.file("p.json.gz"));
  std::string url = live.server->profile_url();
  auto raw = run({"curl", "-sS", "--max-time", "20", "-D", dir.file("headers"), "-o", dir.file("body"), url});
  REQUIRE(raw.status == 0);
  auto headers = read_file(dir.file("headers"));
  REQUIRE(headers.ok());
  CHECK_THAT(*headers, Catch::Contains("Content-Encoding: gzip"));
  CHECK_THAT(*headers, Catch::Contains("Access-Control-Allow-Origin: *"));
  CHECK(*read_file(dir.file("body")) == gz);
  auto inflated = run({"curl", "-sS", "--max-time", "20", "--compressed", url});
  CHECK(inflated.out == demo_profile());
  auto preflight =
      run({"curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}", "-X", "OPTIONS", "-H",
           "Access-Control-Request-Method: POST", live.server->symbol_server_url() + "/asm/v1"});
  CHECK(preflight.out == "204");
  auto no_token = run({"curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}",
                       live.server->origin() + "/profile.json"});
  CHECK(no_token.out == "404");
}

TEST_CASE("port selection: an explicit busy port is an error, the default moves on", "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), demo_profile());
  symbolizer::Symbolizer symbols;
  server::ProfileServer::Config c;
  c.profile_path = dir.file("p.json");
  c.port = 0;
  auto first = server::ProfileServer::start(c, symbols);
  REQUIRE(first.ok());
  c.port = (*first)->port();
  c.port_exact = true;
  auto clash = server::ProfileServer::start(c, symbols);
  REQUIRE_FALSE(clash.ok());
  CHECK_THAT(clash.error(), Catch::Contains(std::to_string(c.port)));
  c.port_exact = false;
  auto next = server::ProfileServer::start(c, symbols);
  REQUIRE(next.ok());
  CHECK((*next)->port() > c.port);
  CHECK((*next)->token() != (*first)->token());
  CHECK_THAT((*next)->profiler_url(), Catch::Contains("%3A" + std::to_string((*next)->port()) + "%2F"));
}

TEST_CASE("symbolicate_profile bakes names, expands inlines and nudges callers", "[server][symbolicate]") {
  TempDir dir;
  write_text(dir.file("in.json"), demo_profile(true));
  auto s = symbolicate_file(dir.file("in.json"), dir.file("out.json.gz"));
  REQUIRE(s.ok());
  std::string out = read_profile_text(dir.file("out.json.gz"));
  CHECK(lint_gecko_profile(out).empty());
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, out);
  CHECK(bool(doc["meta"]["presymbolicated"]) == true);
  CHECK(std::string_view(doc["meta"]["product"]) == "fxprof_srv_demo");  // the rest copied through
  CHECK(int64_t(doc["meta"]["version"]) == 36);

  auto paths = sample_paths(out);
  REQUIRE(paths.size() == 3);
  const std::string lib = " (in fxprof_srv_demo)";
  // second_fn's first byte as a caller is first_fn's call (address - 1); as a leaf it is second_fn.
  CHECK(paths[0] == "main" + lib + ";outer_work" + lib + ";first_fn" + lib + ";compute_hot" + lib +
                        ";inlined_helper" + lib);
  CHECK(paths[1] == paths[0]);
  CHECK(paths[2] == "main" + lib + ";outer_work" + lib + ";second_fn" + lib);

  // The marker's backtrace points at the caller variant of the stack, with valid indices.
  auto t = doc["threads"].at(0);
  int64_t nstacks = static_cast<int64_t>(t["stackTable"]["data"].get_array().size());
  auto m = t["markers"]["data"].at(0);
  int64_t ms = int64_t(m.at(5)["stack"]["samples"]["data"].at(0).at(0));
  CHECK(ms >= 0);
  CHECK(ms < nstacks);
  CHECK(std::string_view(t["stringTable"].at(size_t(int64_t(m.at(0))))) == "DemoMarker");
  // Lines went into the frame table's line column.
  bool has_line = false;
  for (auto f : t["frameTable"]["data"].get_array()) has_line |= f.at(4).is_int64();
  CHECK(has_line);

  // Idempotent in place: a baked profile baked again is unchanged in content.
  REQUIRE(symbolicate_file(dir.file("out.json.gz"), dir.file("out.json.gz")).ok());
  CHECK(sample_paths(read_profile_text(dir.file("out.json.gz"))) == paths);
}

TEST_CASE("child processes are symbolicated with their own libs", "[server][symbolicate]") {
  TempDir dir;
  // The demo profile as the only child process of a parent with no libs and no threads.
  std::string child = demo_profile();
  std::string parent =
      R"({"meta":{"version":36,"interval":1,"startTime":1700000000000,"shutdownTime":null,)"
      R"("processType":0,"product":"parent","stackwalk":1,"debug":0,"presymbolicated":false,)"
      R"("categories":[{"name":"Other","color":"grey","subcategories":["Other"]}],)"
      R"("markerSchema":[]},"libs":[],"threads":[],"pausedRanges":[],"processes":[)" +
      child + "]}";
  write_text(dir.file("in.json"), parent);
  auto info = server::inspect_profile(dir.file("in.json"));
  REQUIRE(info.ok());
  REQUIRE(info->libs.size() == 1);
  CHECK(info->libs[0].debug_name == "fxprof_srv_demo");
  REQUIRE(symbolicate_file(dir.file("in.json"), dir.file("out.json")).ok());
  std::string out = read_profile_text(dir.file("out.json"));
  CHECK(lint_gecko_profile(out).empty());
  auto paths = sample_paths(out, true);
  REQUIRE(paths.size() == 3);
  CHECK_THAT(paths[0],
             Catch::EndsWith(";compute_hot (in fxprof_srv_demo);inlined_helper (in fxprof_srv_demo)"));
}

TEST_CASE("fxprof symbolicate writes a self-contained profile that loads with names and no server",
          "[server][symbolicate][profiler-cli]") {
  TempDir dir;
  write_text(dir.file("in.json"), demo_profile());
  auto r = run({fxprof_bin(), "symbolicate", dir.file("in.json"), "-o", dir.file("shared.json.gz")});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.err, Catch::Contains("local paths"));  // the sharing warning
  auto bad = run({fxprof_bin(), "symbolicate", dir.file("missing.json"), "-o", dir.file("x.json")});
  CHECK(bad.status != 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.json")));
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  ProfilerCli pcli;
  auto load = pcli.load(dir.file("shared.json.gz"));
  REQUIRE(load.status == 0);
  auto tree = pcli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  CHECK_THAT(tree.out, Catch::Contains("inlined_helper"));
  CHECK_THAT(tree.out, Catch::Contains("first_fn"));
  CHECK_THAT(tree.out, Catch::Contains("second_fn"));
  CHECK(tree.out.find("0x") == std::string::npos);
}

TEST_CASE("fxprof load serves to profiler-cli, which symbolicates through our server",
          "[server][profiler-cli]") {
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  TempDir dir;
  write_text(dir.file("p.json.gz"), gzip_text(demo_profile()));
  LoadProcess load({"--no-open", "-P", "0", dir.file("p.json.gz")});
  std::string url = load.wait_for_url();
  INFO(load.err());
  REQUIRE_FALSE(url.empty());
  auto [profile_url, symbol_server] = split_profiler_url(url);

  ProfilerCli pcli;
  auto r = pcli.load(profile_url, symbol_server);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto tree = pcli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  CHECK_THAT(tree.out, Catch::Contains("compute_hot"));
  CHECK_THAT(tree.out, Catch::Contains("inlined_helper"));
  CHECK_THAT(tree.out, Catch::Contains("first_fn"));
  // Files and lines from the symbol server, and the source text itself through /source/v1.
  auto funcs = pcli.cmd({"thread", "functions"});
  std::string hot = function_handle(funcs.out, "compute_hot");
  INFO(funcs.out);
  REQUIRE_FALSE(hot.empty());
  auto src = pcli.cmd({"function", "annotate", hot});
  INFO(src.out << src.err);
  CHECK_THAT(src.out,
             Catch::Contains("Source file: " + source_dir() + "/tests/programs/server/srv_demo.cpp"));
  CHECK_THAT(src.out, Catch::Contains("t += inlined_helper(static_cast<unsigned long>(k % 1000));"));
  // And the disassembly through /asm/v1.
  auto asm_view = pcli.cmd({"function", "annotate", hot, "--mode", "asm"});
  INFO(asm_view.out << asm_view.err);
  CHECK_THAT(asm_view.out, Catch::Contains("Name: compute_hot"));

  CHECK(load.stop(SIGINT) == 0);
  CHECK_THAT(load.err(), Catch::Contains("Local server listening at http://127.0.0.1:"));
  CHECK_THAT(load.err(), Catch::Contains("Press Ctrl+C to stop."));
  CHECK_THAT(load.err(),
             Catch::Contains("Server stopped; the profile stays in " + dir.file("p.json.gz") + "\n"));
  CHECK(std::filesystem::exists(dir.file("p.json.gz")));
}

TEST_CASE("fxprof load --symbol-dir serves a named copy and names the user's file as the one that stays",
          "[server][cli]") {
  TempDir dir;
  const std::string profile = dir.file("bare.json.gz");
  // Self-contained, its stripped binary's sites named by their FDEs: --symbol-dir names them in a temporary
  // copy, which is served and removed at the end.
  auto r = run({fxprof_bin(), "record", "--heap=full", "--save-only", "-o", profile, "--",
                test_program("heap_prog_stripped"), "leak", "50", "1000"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  LoadProcess load({"--no-open", "-P", "0", "--symbol-dir", test_program("heap_syms"), profile});
  REQUIRE_FALSE(load.wait_for_url().empty());
  CHECK(load.stop(SIGINT) == 0);
  INFO(load.err());
  CHECK_THAT(load.err(), Catch::Contains("Server stopped; the profile stays in " + profile + "\n"));
  CHECK_THAT(load.err(), !Catch::Contains("fxprof-load"));
  CHECK(std::filesystem::exists(profile));
}

TEST_CASE("profiler-cli --with-samply runs fxprof as its samply", "[server][profiler-cli]") {
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  TempDir dir;
  write_text(dir.file("p.json"), demo_profile());
  ProfilerCli pcli;
  CmdOptions o;
  o.env["PROFILER_CLI_SAMPLY_PATH"] = fxprof_bin();
  auto r = pcli.load_args({dir.file("p.json"), "--with-samply"}, o);
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto tree = pcli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  CHECK_THAT(tree.out, Catch::Contains("compute_hot"));
  CHECK_THAT(tree.out, Catch::Contains("inlined_helper"));
}

// Waits (poll, no sleeps) until someone writes to the FIFO at `path`; false after `timeout`.
static bool wait_fifo(const std::string& path, std::chrono::milliseconds timeout) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return false;
  pollfd p{fd.get(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

TEST_CASE("fxprof load opens $BROWSER on a private redirect page, never on the token, and SIGTERM stops it",
          "[server][cli]") {
  REQUIRE(geteuid() == 0);  // another local user must not read the page: the suite runs as root
  const passwd* pw = ensure_test_user();
  REQUIRE(pw != nullptr);
  TempDir dir, runtime;
  write_text(dir.file("p.json"), demo_profile());
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  // The stand-in browser records its command line, the page's and its folder's modes, and the page.
  std::string script = dir.file("browser.sh");
  write_text(script, "#!/bin/sh\nf=\"${1#file://}\"\nprintf '%s\\n' \"$@\" > " + dir.file("argv") +
                         "\necho \"$f\" > " + dir.file("file") +
                         "\nstat -c %a \"$f\" \"$(dirname \"$f\")\" > " + dir.file("modes") +
                         "\ncat \"$f\" > " + dir.file("page") + "\necho done > " + dir.file("fifo") + "\n");
  ::chmod(script.c_str(), 0755);
  ::chmod(runtime.path().c_str(), 0755);
  LoadProcess load({"-P", "0", dir.file("p.json")},
                   {{"BROWSER", script}, {"DISPLAY", ":99"}, {"XDG_RUNTIME_DIR", runtime.path()}});
  std::string url = load.wait_for_url();  // still printed
  REQUIRE_FALSE(url.empty());
  REQUIRE(wait_fifo(dir.file("fifo"), std::chrono::seconds(10)));
  auto [profile_url, symbol_server] = split_profiler_url(url);
  const std::string token = symbol_server.substr(symbol_server.rfind('/') + 1);
  REQUIRE(token.size() == 39);
  const std::string argv = read_file(dir.file("argv")).value();
  INFO(argv);
  CHECK(argv.find(token) == std::string::npos);
  CHECK(argv.rfind("file://" + runtime.path() + "/fxprof-", 0) == 0);
  std::string page_path = read_file(dir.file("file")).value();
  page_path.pop_back();
  CHECK(read_file(dir.file("modes")).value() == "600\n700\n");
  std::string page = read_file(dir.file("page")).value();
  std::string escaped_url = url;
  for (size_t at = 0; (at = escaped_url.find('&', at)) != std::string::npos; at += 5)
    escaped_url.replace(at, 1, "&amp;");
  CHECK_THAT(page, Catch::Contains("<meta http-equiv=\"refresh\" content=\"0;url=" + escaped_url + "\">"));
  // Another local user can neither read the page nor list its folder.
  CmdOptions as_user;
  as_user.uid = pw->pw_uid;
  as_user.gid = pw->pw_gid;
  auto peek = run({"cat", page_path}, as_user);
  CHECK(peek.status != 0);
  CHECK_THAT(peek.err, Catch::Contains("Permission denied"));

  CHECK(load.stop(SIGTERM) == 0);
  CHECK_THAT(load.err(), Catch::Contains("local network"));
  CHECK(std::filesystem::exists(dir.file("p.json")));
  CHECK_FALSE(std::filesystem::exists(page_path));  // gone with its folder when the server stops
  CHECK_FALSE(std::filesystem::exists(std::filesystem::path(page_path).parent_path()));
}

TEST_CASE("record serves with the symbolizer its summary loaded: no library is read a second time",
          "[server][cli]") {
  // The program is a copy that is deleted once the URL is printed: only the libraries record already loaded
  // for its summary line can answer for it (a second load would find no file).
  TempDir dir;
  const std::string program = dir.file("fxprof_srv_demo");
  REQUIRE(run({"cp", demo_path(), program}).status == 0);
  Background rec({fxprof_bin(), "record", "-n", "-o", dir.file("p.json.gz"), "--", program, "200000"});
  const std::string pre = "https://profiler.firefox.com/from-url/";
  std::string line = rec.wait_for_line(pre, std::chrono::seconds(60));
  INFO(rec.err());
  REQUIRE(line.find(pre) != std::string::npos);
  CHECK_THAT(rec.err(), Catch::Contains("top self: ") && Catch::Contains("inlined_helper"));
  REQUIRE(std::filesystem::remove(program));
  auto [profile_url, symbol_server] = split_profiler_url(line.substr(line.find(pre)));
  const std::string origin = symbol_server.substr(0, symbol_server.rfind('/'));
  httplib::Client cli(origin);
  cli.set_read_timeout(30);
  DemoAddrs d = demo_addrs();
  auto r = cli.Post(symbol_server.substr(origin.size()) + "/symbolicate/v5",
                    symbolicate_request({d.hot_inlined, d.second_start}), "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK_THAT(r->body, Catch::Contains("\"compute_hot\""));
  CHECK_THAT(r->body, Catch::Contains("inlined_helper"));
  CHECK_THAT(r->body, Catch::Contains("\"second_fn\""));
  CHECK(rec.stop(SIGINT) == 0);
}

TEST_CASE("a recorded profile: served by fxprof load and baked by fxprof symbolicate",
          "[server][profiler-cli]") {
  INFO("profiler-cli comes with `make test-deps`");
  REQUIRE(have_profiler_cli());
  TempDir dir;
  std::string raw = dir.file("raw.json.gz");
  auto rec =
      run({fxprof_bin(), "record", "--no-symbolicate", "--save-only", "-o", raw, "--", demo_path(), "400000"},
          {.timeout = std::chrono::seconds(60)});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  REQUIRE(lint_gecko_profile(read_profile_text(raw)).empty());

  SECTION("served, symbolicated by our server") {
    LoadProcess load({"--no-open", "-P", "0", raw});
    std::string url = load.wait_for_url();
    REQUIRE_FALSE(url.empty());
    auto [profile_url, symbol_server] = split_profiler_url(url);
    ProfilerCli pcli;
    auto r = pcli.load(profile_url, symbol_server);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    auto tree = pcli.cmd({"thread", "samples-top-down"});
    INFO(tree.out << tree.err);
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!main"));
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!compute_hot"));
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!inlined_helper"));
    CHECK(load.stop(SIGTERM) == 0);
  }
  SECTION("baked, and loaded with no server") {
    std::string shared = dir.file("shared.json");
    auto sym = run({fxprof_bin(), "symbolicate", raw, "-o", shared}, {.timeout = std::chrono::seconds(60)});
    INFO(sym.err);
    REQUIRE(sym.status == 0);
    std::string text = read_profile_text(shared);
    CHECK(lint_gecko_profile(text).empty());
    CHECK_THAT(text, Catch::Contains("\"presymbolicated\":true"));
    ProfilerCli pcli;
    auto r = pcli.load(shared);
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    auto tree = pcli.cmd({"thread", "samples-top-down"});
    INFO(tree.out << tree.err);
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!compute_hot"));
    CHECK_THAT(tree.out, Catch::Contains("fxprof_srv_demo!inlined_helper"));
    CHECK_THAT(tree.out, Catch::Contains("libc.so.6!"));  // libraries other than the program's, too
  }
}
