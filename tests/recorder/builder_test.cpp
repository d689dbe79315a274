// Tests of recorder/builder.cpp's libs (the lib-relative addresses it writes) on binaries linked the ways
// users link them: each program is recorded with DWARF call graphs and every frame is named by fxprof's own
// symbolizer, as the profile's reader will. lld's layout (read-only and code segments in one file page) used
// to shift every name by 0x1000 and make every CFI lookup miss (issue 10).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "recorder/recorder.h"
#include "symbolizer/symbolizer.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::test_program;

namespace {

// Names frames of one process through symbolizer::Symbolizer::lookup, each address once.
class Names {
 public:
  explicit Names(const model::Process& proc) : proc_(proc), sym_(options()) {
    for (const model::Lib& l : proc.libs)
      sym_.add_known_lib({l.debug_name, l.breakpad_id, l.name, l.path, l.debug_path, l.code_id, l.arch});
  }
  std::string name(uint64_t address) {
    auto [it, fresh] = cache_.try_emplace(address);
    if (!fresh) return it->second;
    for (const model::Lib& l : proc_.libs) {
      if (address < l.start || address >= l.end) continue;
      auto r =
          sym_.lookup(l.debug_name, l.breakpad_id, std::vector<uint64_t>{address - (l.start - l.offset)});
      if (r.ok() && !r->empty() && (*r)[0].found) it->second = (*r)[0].function;
      break;
    }
    return it->second;
  }

 private:
  static symbolizer::Options options() {
    symbolizer::Options o;
    o.use_debuginfod = false;
    return o;
  }
  const model::Process& proc_;
  symbolizer::Symbolizer sym_;
  std::map<uint64_t, std::string> cache_;
};

}  // namespace

TEST_CASE("builder: lld, rust-lld and GNU ld layouts give the right names and stacks rooted in main",
          "[recorder][dwarf]") {
  auto name =
      GENERATE(as<std::string>{}, "link_lld", "link_rust_lld", "link_bfd_sepcode", "link_bfd_nosepcode");
  INFO(name);
  std::string path = test_program(name);
  INFO(path << (access(path.c_str(), X_OK) == 0 ? "" : " is missing (rustc: make test-deps)"));
  REQUIRE(access(path.c_str(), X_OK) == 0);
  recorder::Options o;
  o.command = {path, "spin", "300"};
  o.call_graph = recorder::CallGraph::Dwarf;
  auto r = recorder::record(o);
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  REQUIRE(p.processes.size() == 1);
  const model::Process& proc = p.processes[0];
  const model::Thread& main = proc.threads.at(0);
  REQUIRE(main.samples.size() >= 150);  // 300 ms of CPU at 1 kHz, +-50% on a loaded machine
  Names names(proc);
  size_t hot = 0, rooted = 0;
  for (const model::Sample& s : main.samples) {
    std::vector<std::string> stack;  // leaf first
    bool leaf = true;
    for (model::StackId id = s.stack; id != model::kNoStack; id = p.stacks.prefix(id)) {
      const model::Frame& f = p.frames.get(p.stacks.frame(id));
      if (f.kind != model::FrameKind::Native) continue;
      stack.push_back(names.name(leaf ? f.address : f.address - 1));
      leaf = false;
    }
    auto has = [&](const std::string& n) { return std::find(stack.begin(), stack.end(), n) != stack.end(); };
    if (has("elf_probe_hot")) ++hot;
    if (has("elf_probe_hot") && has("elf_probe_outer") && has("main")) ++rooted;
  }
  // perf report on the same program puts elf_probe_hot at ~99% self and every stack under main.
  CHECK(hot >= main.samples.size() * 9 / 10);
  CHECK(rooted >= main.samples.size() * 9 / 10);
}

TEST_CASE(
    "builder: a program in its own mount namespace is read through /proc/PID/root, not the host's file "
    "at its path") {
  // Issue 10 item 12: in a container a binary's path is the container's. Here a tmpfs mounted in a new
  // mount namespace holds the real program, while the same path outside holds another program: reading the
  // host's file named the samples after the wrong binary and unwound them with the wrong CFI.
  fxprof::test::TempDir dir;
  std::filesystem::create_directory(dir.file("mnt"));
  const std::string app = dir.file("mnt/app");
  std::filesystem::copy_file(test_program("sym_alias"), app);  // the decoy at the same path outside
  std::filesystem::copy_file(test_program("dq_work"), dir.file("real"));
  const std::string script = "mount -t tmpfs fxprof-test " + dir.file("mnt") + " && cp " + dir.file("real") +
                             " " + app + " && exec " + app + " 300";
  const std::string out = dir.file("p.json.gz");
  auto r = fxprof::test::run({fxprof::test::fxprof_bin(), "record", "--save-only", "--cpu-only", "-o", out,
                              "--", "unshare", "-m", "--propagation", "private", "sh", "-c", script});
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(!std::filesystem::exists(dir.file("mnt/real")));  // the mount was private to the namespace
  auto folded = fxprof::test::run({fxprof::test::fxprof_bin(), "export", "folded", out, "-o", "-"});
  INFO(folded.err);
  REQUIRE(folded.status == 0);
  // Samples in the program's own code are named from its file and unwound to main through its CFI.
  uint64_t spinning = 0, rooted = 0;
  std::istringstream lines(folded.out);
  for (std::string l; std::getline(lines, l);) {
    const size_t space = l.rfind(' ');
    if (space == std::string::npos || l.find("spin_cpu_ms") == std::string::npos) continue;
    const uint64_t n = std::stoull(l.substr(space + 1));
    spinning += n;
    if (l.find("main;dq_outer;dq_middle;dq_inner;spin_cpu_ms") != std::string::npos) rooted += n;
  }
  INFO(folded.out.substr(0, 4000));
  // 300 ms of CPU at the profile's rate (the kernel may have lowered it), +-25%.
  simdjson::dom::parser parser;
  const double interval_ms =
      double(fxprof::test::parse_json(parser, fxprof::test::read_profile_text(out))["meta"]["interval"]);
  const double expected = 300 / interval_ms;
  CHECK(spinning >= expected * 0.75);
  CHECK(spinning <= expected * 1.25);
  CHECK(rooted * 10 >= spinning * 9);
}
