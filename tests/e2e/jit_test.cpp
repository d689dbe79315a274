// JIT code, end to end (issue 10 items 2 and 3): a program of ours that generates machine code into
// anonymous memory and names it in /tmp/perf-PID.map and a jitdump file, and Debian's node with
// --perf-basic-prof. The names must reach every path: the lazily served profile (through the Firefox
// Profiler's own code and our server), a baked profile and the exports; stacks through the JIT code
// (frame pointers, or a scan where there are none) must reach main.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

struct Folded {
  std::vector<std::string> frames;  // root first
  size_t count = 0;
  bool has(const std::string& f) const { return std::find(frames.begin(), frames.end(), f) != frames.end(); }
};

std::vector<Folded> read_folded(const std::string& path) {
  std::vector<Folded> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    Folded f;
    f.count = std::stoul(line.substr(sp + 1));
    std::stringstream ss(line.substr(0, sp));
    for (std::string fr; std::getline(ss, fr, ';');) f.frames.push_back(fr);
    out.push_back(std::move(f));
  }
  return out;
}

size_t samples_with(const std::vector<Folded>& stacks, const std::string& frame, bool and_main = false) {
  size_t n = 0;
  for (const Folded& f : stacks)
    if (f.has(frame) && (!and_main || f.has("main"))) n += f.count;
  return n;
}

// Removes /tmp/perf-PID.map of the recorded processes (the runtime leaves it, as perf expects).
struct PerfMapCleanup {
  std::vector<int64_t> pids;
  ~PerfMapCleanup() {
    for (int64_t pid : pids) unlink(("/tmp/perf-" + std::to_string(pid) + ".map").c_str());
  }
};

uint64_t stack_walk_entry(const std::string& text, const std::string& label) {
  simdjson::dom::parser parser;
  auto root = parse_json(parser, text);
  for (simdjson::dom::element section : simdjson::dom::array(root["meta"]["extra"]))
    for (simdjson::dom::element e : simdjson::dom::array(section["entries"]))
      if (std::string_view(e["label"]) == label) return uint64_t(e["value"]);
  FAIL("no meta.extra entry " << label);
  return 0;
}

// What the `Native allocation` rows of a profile's top-level threads say about JIT code: how many rows have
// `function` on their stack, and the raw addresses left in their stacks ("0x...", unnamed) that a line of
// `perf_map` covers outside every library of the process (node's builtins are in its binary: named later
// from its symbols, as in CPU samples).
struct HeapJit {
  size_t rows = 0, named = 0;
  std::set<uint64_t> raw_jit;
};
HeapJit heap_rows_jit(const std::string& profile_text, const std::string& perf_map,
                      const std::string& function) {
  std::vector<std::pair<uint64_t, uint64_t>> code;
  std::ifstream map(perf_map);
  for (std::string start, size, name; map >> start >> size && std::getline(map, name);)
    code.push_back(
        {std::stoull(start, nullptr, 16), std::stoull(start, nullptr, 16) + std::stoull(size, nullptr, 16)});
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, profile_text);
  std::vector<std::pair<uint64_t, uint64_t>> libs;
  for (simdjson::dom::element l : simdjson::dom::array(doc["libs"]))
    libs.push_back({uint64_t(l["start"]), uint64_t(l["end"])});
  // A perf map has tens of thousands of lines and a full heap recording thousands of rows: the ranges merged
  // into disjoint ones and searched, each stack looked at once (a scan per frame ran for over ten minutes).
  auto disjoint = [](std::vector<std::pair<uint64_t, uint64_t>> r) {
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const auto& x : r)
      if (!out.empty() && x.first <= out.back().second)
        out.back().second = std::max(out.back().second, x.second);
      else
        out.push_back(x);
    return out;
  };
  code = disjoint(std::move(code));
  libs = disjoint(std::move(libs));
  auto in = [](const std::vector<std::pair<uint64_t, uint64_t>>& ranges, uint64_t a) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), std::pair{a, UINT64_MAX});
    return it != ranges.begin() && a < std::prev(it)->second;
  };
  HeapJit out;
  for (simdjson::dom::element t : simdjson::dom::array(doc["threads"])) {
    // simdjson's array::at(i) walks from the start: the tables, indexed once.
    auto table = [](simdjson::dom::element a) {
      std::vector<simdjson::dom::element> v;
      for (simdjson::dom::element e : simdjson::dom::array(a)) v.push_back(e);
      return v;
    };
    const auto strings = table(t["stringTable"]), frames = table(t["frameTable"]["data"]),
               stacks = table(t["stackTable"]["data"]);
    const auto prefix_col = size_t(int64_t(t["stackTable"]["schema"]["prefix"]));
    const auto frame_col = size_t(int64_t(t["stackTable"]["schema"]["frame"]));
    const auto location_col = size_t(int64_t(t["frameTable"]["schema"]["location"]));
    const auto data_col = size_t(int64_t(t["markers"]["schema"]["data"]));
    std::map<int64_t, bool> named_stacks;  // this thread's stacks: through `function`
    for (simdjson::dom::element m : simdjson::dom::array(t["markers"]["data"])) {
      simdjson::dom::element data = m.at(data_col);
      if (data.is_null() || data["type"].error() || std::string_view(data["type"]) != "Native allocation")
        continue;
      ++out.rows;
      simdjson::dom::element stack = data["stack"]["samples"]["data"].at(0).at(0);
      if (stack.is_null()) continue;
      auto [seen, fresh] = named_stacks.try_emplace(int64_t(stack), false);
      if (fresh)
        for (auto s = stack; !s.is_null(); s = stacks.at(size_t(int64_t(s))).at(prefix_col)) {
          const size_t frame = size_t(int64_t(stacks.at(size_t(int64_t(s))).at(frame_col)));
          const std::string_view name(strings.at(size_t(int64_t(frames.at(frame).at(location_col)))));
          seen->second = seen->second || name.find(function) != std::string_view::npos;
          if (!name.starts_with("0x")) continue;
          const uint64_t a = std::stoull(std::string(name.substr(0, name.find(' '))), nullptr, 16);
          if (!in(libs, a) && (in(code, a) || in(code, a - 1))) out.raw_jit.insert(a);
        }
      out.named += seen->second ? 1 : 0;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("JIT code named by a perf map and a jitdump, unwound to main", "[e2e][jit]") {
  TempDir dir;
  CpuLog cpu;
  const std::string raw = dir.file("jit.json.gz");
  // --cpu-only: the phases' samples are compared with their CPU time (a loaded machine would add
  // [preempted]).
  auto r = record(raw, {test_program("jit_prog"), dir.path(), "300"}, {"--cpu-only"},
                  {.env = {{CpuLog::kVariable, cpu.path()}}});
  INFO(r.err << cpu.text());
  REQUIRE(r.status == 0);
  const std::string text = read_profile_text(raw);
  PerfMapCleanup cleanup;
  for (const ThreadSummary& t : summarize(text)) cleanup.pids.push_back(t.pid);
  {
    auto problems = lint_gecko_profile(text);
    for (const auto& p : problems) UNSCOPED_INFO(p);
    REQUIRE(problems.empty());
  }

  // The exports (symbolicated from the raw profile: the JIT names were baked in when recording).
  const std::string folded = dir.file("jit.folded");
  auto ex = run({fxprof_bin(), "export", "folded", raw, "-o", folded});
  INFO(ex.err);
  REQUIRE(ex.status == 0);
  auto stacks = read_folded(folded);
  // Each phase's samples are its CPU time at 1 kHz. jit_hot_loop is named only by the perf map,
  // jit_nofp_loop only by the jitdump; jit_calls_back by both, and the jitdump (read last) wins.
  CHECK_SAMPLES(samples_with(stacks, "jit_hot_loop"), cpu.ms("hot"), 1000);
  CHECK_SAMPLES(samples_with(stacks, "jit_calls_back"), cpu.ms("callback"), 1000);
  CHECK_SAMPLES(samples_with(stacks, "c_callback"), cpu.ms("callback"), 1000);
  CHECK_SAMPLES(samples_with(stacks, "jit_nofp_loop"), cpu.ms("nofp"), 1000);
  CHECK(samples_with(stacks, "jit_calls_back_map") == 0);
  // Through the JIT frames to main: by frame pointers (jit_hot_loop, and jit_calls_back under c_callback)
  // and by scanning for the return address (jit_nofp_loop has rbp = 0). At least 97 % of each.
  for (std::string fn : {"jit_hot_loop", "jit_calls_back", "jit_nofp_loop"}) {
    INFO(fn);
    CHECK(samples_with(stacks, fn, true) * 100 >= samples_with(stacks, fn) * 97);
  }
  // The heuristics are counted in the profile's meta (Profile Info, "Stack walking").
  CHECK_SAMPLES(stack_walk_entry(text, "Through code without CFI by stack scanning"), cpu.ms("nofp"), 1000);
  CHECK_SAMPLES(stack_walk_entry(text, "Through code without CFI by frame pointers"),
                cpu.ms("hot") + cpu.ms("callback"), 1000);

  // A baked profile names them, within the jitdump's pseudo-library.
  const std::string baked = dir.file("baked.json");
  auto sym = run({fxprof_bin(), "symbolicate", raw, "-o", baked});
  INFO(sym.err);
  REQUIRE(sym.status == 0);
  const std::string baked_text = read_profile_text(baked);
  for (std::string fn : {"jit_hot_loop", "jit_calls_back", "jit_nofp_loop"})
    CHECK(baked_text.find("\"" + fn + " (in jit-" + std::to_string(cleanup.pids.at(0)) + ".dump)\"") !=
          std::string::npos);

  // The front end, served lazily by our server: the same names under main.
  ProfilerCli cli;
  auto server = load_through_fxprof(cli, raw);
  REQUIRE(cli.select_thread("GeckoMain"));
  auto tree = cli.cmd({"thread", "samples-top-down"});
  INFO(tree.out << tree.err);
  REQUIRE(tree.status == 0);
  for (std::string fn :
       {"jit_prog!main", "jit_hot_loop", "jit_calls_back", "jit_prog!c_callback", "jit_nofp_loop"})
    CHECK(tree.out.find(fn) != std::string::npos);
  // No raw address of the JIT code's page left ("code 0xSTART 0xEND" on the program's stdout).
  size_t code = r.out.find("code 0x");
  REQUIRE(code != std::string::npos);
  const std::string page = r.out.substr(code + 5, r.out.find(' ', code + 5) - code - 5 - 3);
  INFO(page);
  CHECK(tree.out.find(page) == std::string::npos);
}

TEST_CASE("node --perf-basic-prof: the hot JavaScript function is the top leaf", "[e2e][jit]") {
  TempDir dir;
  const std::string out = dir.file("node.json.gz");
  // CPU time: node's idle worker threads would fill a wall-clock profile with their waits.
  auto r = run({fxprof_bin(), "record", "--cpu-only", "--save-only", "-o", out, "--export", "folded", "--",
                "node", "--perf-basic-prof", source_dir() + "/tests/programs/jit/hot.js", "1000"});
  INFO(r.err);
  PerfMapCleanup cleanup;
  for (const ThreadSummary& t : summarize(read_profile_text(out))) cleanup.pids.push_back(t.pid);
  REQUIRE(r.status == 0);
  // The summary line's top self function: "JS:*fxprofHotLoop /path/hot.js:3:23" (V8's name for it).
  size_t top = r.err.find("fxprof: top self: ");
  REQUIRE(top != std::string::npos);
  std::string first = r.err.substr(top + 18, r.err.find(',', top) - top - 18);
  CHECK(first.find("fxprofHotLoop") != std::string::npos);
  // Its samples, leaf or not, reach main through V8's frames.
  auto stacks = read_folded(dir.file("node.folded"));
  size_t hot = 0, hot_main = 0, all = 0;
  for (const Folded& f : stacks) {
    all += f.count;
    bool in_hot = std::any_of(f.frames.begin(), f.frames.end(), [](const std::string& fr) {
      return fr.find("fxprofHotLoop") != std::string::npos;
    });
    if (!in_hot) continue;
    hot += f.count;
    if (std::any_of(f.frames.begin(), f.frames.end(),
                    [](const std::string& fr) { return fr.rfind("node::Start", 0) == 0; }))
      hot_main += f.count;
  }
  INFO("samples " << all << ", in fxprofHotLoop " << hot << ", of those from node::Start " << hot_main);
  CHECK(hot * 2 > all);  // the script spends ~1 s in it, node's start-up ~0.1-0.3 s
  CHECK(hot_main * 100 >= hot * 97);
}

TEST_CASE("a perf map or jitdump another user owns or may write is not used, and a data-quality line says so",
          "[e2e][jit]") {
  // Anyone can create /tmp/perf-PID.map: another user's map named 13% of root's profile. Here jit_prog (run
  // by root) writes its files, and the test hands the map to another user and makes the jitdump writable by
  // others while it runs, as an attacker's files would be.
  REQUIRE(geteuid() == 0);
  TempDir dir;
  const std::string out = dir.file("foreign.json");
  Background rec({fxprof_bin(), "record", "--save-only", "--no-symbolicate", "--cpu-only", "-q", "-o", out,
                  "--", test_program("jit_prog"), dir.path(), "200"});
  REQUIRE(rec.wait_for_line("code 0x").starts_with("code 0x"));  // both files are written
  std::string dump;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().starts_with("jit-")) dump = e.path().string();
  REQUIRE(!dump.empty());
  const std::string pid = dump.substr(dump.rfind("jit-") + 4, dump.size() - dump.rfind("jit-") - 4 - 5);
  const std::string map = "/tmp/perf-" + pid + ".map";
  PerfMapCleanup cleanup{{std::stoll(pid)}};
  REQUIRE(::chown(map.c_str(), 4242, 4242) == 0);
  REQUIRE(::chmod(dump.c_str(), 0666) == 0);
  const int status = rec.stop(0, std::chrono::seconds(120));
  const std::string err = rec.err();
  INFO(err);
  REQUIRE(status == 0);
  CHECK(err.find("fxprof: " + map + ": owned by user 4242, not by the process's user (0) or root: its JIT " +
                 "function names were not used") != std::string::npos);
  CHECK(err.find("fxprof: " + dump + ": writable by others: its JIT function names were not used") !=
        std::string::npos);
  const std::string text = read_profile_text(out);
  CHECK(text.find("jit_hot_loop") == std::string::npos);
  CHECK(text.find("jit_nofp_loop") == std::string::npos);
  CHECK(text.find("JIT names not used (file not the process's): " + map) != std::string::npos);  // meta
}

namespace {

// Samples in the comparator's place: under V8's sort builtins, the first JIT frame (a V8 code name, or a
// raw address: unnamed) is the function sort called, which can only be the comparator. Returns
// {samples there, of those named fxprofCompare}.
std::pair<size_t, size_t> comparator_samples(const std::vector<Folded>& stacks) {
  auto is_sort = [](const std::string& f) {
    return f.find("ArrayTimSort") != std::string::npos || f.find("ArrayPrototypeSort") != std::string::npos;
  };
  auto is_jit = [](const std::string& f) {
    for (const char* p : {"JS:", "Stub:", "RegExp:", "Function:", "LazyCompile:", "Script:", "Eval:", "0x"})
      if (f.rfind(p, 0) == 0) return true;
    return false;
  };
  size_t all = 0, right = 0;
  for (const Folded& f : stacks) {
    auto last_sort = std::find_if(f.frames.rbegin(), f.frames.rend(), is_sort);
    if (last_sort == f.frames.rend()) continue;
    auto callee = std::find_if(last_sort.base(), f.frames.end(), is_jit);
    if (callee == f.frames.end()) continue;
    all += f.count;
    if (callee->find("fxprofCompare") != std::string::npos) right += f.count;
  }
  return {all, right};
}

}  // namespace

// Issue 22: V8 reuses code addresses; each sample must get the code at its address at its time. reuse.js
// compiles a new comparator each round after compiling (and collecting) much other code, so comparators
// land where other functions were and other code later lands where they were.
TEST_CASE("node: reused JIT addresses are named by time (jitdump and perf map)", "[e2e][jit]") {
  for (const std::string mode : {"--perf-prof", "--perf-basic-prof"}) {
    INFO(mode);
    TempDir dir;
    const std::string out = dir.file("node.json.gz");
    CmdOptions opts;
    opts.cwd = dir.path();  // jit-PID.dump is written to the current folder
    auto r = run({fxprof_bin(), "record", "--cpu-only", "--save-only", "-o", out, "--export", "folded", "--",
                  "node", mode, "--expose-gc", source_dir() + "/tests/programs/jit/reuse.js", "4", "150"},
                 opts);
    INFO(r.err);
    PerfMapCleanup cleanup;
    for (const ThreadSummary& t : summarize(read_profile_text(out))) cleanup.pids.push_back(t.pid);
    REQUIRE(r.status == 0);
    auto [all, right] = comparator_samples(read_folded(dir.file("node.folded")));
    INFO("comparator samples " << all << ", named fxprofCompare " << right);
    REQUIRE(all > 0);
    // perf names ~100 % after `perf inject --jit` (jitdump) and 13-24 % from perf maps (bench/jit.sh).
    CHECK(right * 100 >= all * (mode == "--perf-prof" ? 95 : 90));
  }
}

TEST_CASE("node: attached while it writes its perf map, reused addresses still named by time", "[e2e][jit]") {
  TempDir dir;
  Background node({"node", "--perf-basic-prof", "--expose-gc", source_dir() + "/tests/programs/jit/reuse.js",
                   "5", "100"});
  PerfMapCleanup cleanup{{node.pid()}};
  REQUIRE(!node.wait_for_line("round 2").empty());  // its map has two rounds' code already
  const std::string out = dir.file("attach.json.gz");
  // Until node exits: its last three rounds (each one sorting for 100 ms of CPU) are recorded.
  auto r = run({fxprof_bin(), "record", "--cpu-only", "--save-only", "-o", out, "--export", "folded", "-p",
                std::to_string(node.pid())});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto [all, right] = comparator_samples(read_folded(dir.file("attach.folded")));
  INFO("comparator samples " << all << ", named fxprofCompare " << right);
  REQUIRE(all > 0);
  CHECK(right * 100 >= all * 90);
}

namespace {

// pyenv's Python X.Y (any patch release): $PYENV_ROOT or ~/.pyenv. Debian 12 has neither 3.12 nor 3.13, so
// the tests use pyenv's (`pyenv install 3.12 3.13`); "" when missing, and the test fails saying so.
std::string pyenv_python(const std::string& version) {
  const char* root = std::getenv("PYENV_ROOT");
  const char* home = std::getenv("HOME");
  const std::string dir = root ? root : std::string(home ? home : "/root") + "/.pyenv";
  std::vector<std::string> found;
  if (DIR* d = opendir((dir + "/versions").c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind(version + ".", 0) == 0 &&
          access((dir + "/versions/" + name + "/bin/python3").c_str(), X_OK) == 0)
        found.push_back(dir + "/versions/" + name + "/bin/python3");
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  return found.empty() ? "" : found.back();
}

}  // namespace

// Issue 22 item 4: Python's perf trampolines (-X perf) give every Python function a frame named by the
// perf map. 3.13's leave a stale pointer to a trampoline below their return address, which the stack scan
// took for a frame: 99 % of the stacks had an unnamed frame and each function split in two. 3.12 and 3.13
// must both give one path to the hot function, without unnamed frames, and its CPU time in samples.
TEST_CASE("python -X perf (3.12 and 3.13): clean stacks, one path per function", "[e2e][jit]") {
  for (const std::string version : {"3.12", "3.13"}) {
    INFO("Python " << version);
    const std::string python = pyenv_python(version);
    INFO("pyenv's python " << version << " is needed: pyenv install " << version);
    REQUIRE(!python.empty());
    TempDir dir;
    const std::string out = dir.file("py.json.gz");
    auto r = run({fxprof_bin(), "record", "--cpu-only", "--save-only", "-o", out, "--export", "folded", "--",
                  python, "-X", "perf", source_dir() + "/tests/programs/jit/nested.py", "600"});
    INFO(r.err << r.out);
    PerfMapCleanup cleanup;
    for (const ThreadSummary& t : summarize(read_profile_text(out))) cleanup.pids.push_back(t.pid);
    REQUIRE(r.status == 0);
    const size_t at = r.out.find("cpu_ms ");
    REQUIRE(at != std::string::npos);
    const double cpu_ms = std::stod(r.out.substr(at + 7));
    size_t inner = 0, unnamed = 0;
    std::set<std::vector<std::string>> paths;  // root .. py::fxprof_inner
    for (const Folded& f : read_folded(dir.file("py.folded"))) {
      auto it = std::find_if(f.frames.begin(), f.frames.end(),
                             [](const std::string& fr) { return fr.rfind("py::fxprof_inner:", 0) == 0; });
      if (it == f.frames.end()) continue;
      inner += f.count;
      paths.insert(std::vector<std::string>(f.frames.begin(), it + 1));
      if (std::any_of(f.frames.begin(), it, [](const std::string& fr) { return fr.rfind("0x", 0) == 0; }))
        unnamed += f.count;
    }
    CHECK_SAMPLES(inner, cpu_ms, 1000);
    CHECK(unnamed == 0);
    CHECK(paths.size() == 1);
    for (const auto& p : paths) {
      std::string joined;
      for (const auto& fr : p) joined += fr + ";";
      INFO(joined);
      CHECK(std::find(p.begin(), p.end(), "Py_BytesMain") != p.end());  // python3's main
      CHECK(std::any_of(p.begin(), p.end(),
                        [](const std::string& fr) { return fr.rfind("py::fxprof_outer:", 0) == 0; }));
    }
  }
}

// The heap's rows are added after the recorder named the JIT frames of its samples: their stacks must be
// named by the same perf map (they kept raw addresses inside it: 0 rows named fxprofMakeBuffers and 47 of its
// code addresses left raw, where the CPU samples of the same thread said `JS:*fxprofMakeBuffers`).
TEST_CASE("node --perf-basic-prof --heap=full: allocation stacks name the JavaScript function",
          "[e2e][jit]") {
  TempDir dir;
  const std::string out = dir.file("node.json.gz");
  CmdOptions slow;
  slow.timeout = std::chrono::seconds(300);  // every allocation goes through the heap pipe
  auto r = record(out, {"node", "--perf-basic-prof", source_dir() + "/tests/programs/jit/alloc.js", "100"},
                  {"--heap=full", "--cpu-only"}, slow);
  INFO(r.err);
  PerfMapCleanup cleanup;
  const std::string text = read_profile_text(out);
  for (const ThreadSummary& t : summarize(text)) cleanup.pids.push_back(t.pid);
  REQUIRE(r.status == 0);
  REQUIRE(!cleanup.pids.empty());
  const HeapJit heap =
      heap_rows_jit(text, "/tmp/perf-" + std::to_string(cleanup.pids[0]) + ".map", "fxprofMakeBuffers");
  INFO(heap.rows << " allocation rows, " << heap.named << " through fxprofMakeBuffers, "
                 << heap.raw_jit.size() << " raw JIT addresses");
  REQUIRE(heap.rows > 0);
  CHECK(heap.named > 0);
  CHECK(heap.raw_jit.empty());
}
