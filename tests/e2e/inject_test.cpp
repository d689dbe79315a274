// Issue 33, NVTX and ITT without a rebuild: `fxprof record` names libfxprof_inject.so in
// NVTX_INJECTION64_PATH and INTEL_LIBITTNOTIFY64 for the program it launches, and the ranges, marks and
// thread names the program hands to NVTX's and ITT's clients become markers on the thread that made them,
// with their times to the tenth of a millisecond: our program (tests/programs/markers/inject_ranges.cpp, both
// clients declared from their documentation) and LLVM's OpenMP runtime, whose ITT client nobody here wrote.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/fd.h"
#include "gecko/gecko_reader.h"
#include "model/markers.h"
#include "tests/e2e/e2e.h"

using namespace fxprof::test;
using fxprof::model::Marker;
using fxprof::model::Profile;

namespace {

struct Truth {
  uint32_t tid = 0;
  std::string name;
  uint64_t start = 0, end = 0, min = 0;
};

std::vector<Truth> read_truth(const std::string& path) {
  auto text = fxprof::read_file(path);
  REQUIRE(text);
  std::vector<Truth> out;
  std::istringstream in(*text);
  for (Truth t; in >> t.tid >> t.name >> t.start >> t.end >> t.min;) out.push_back(t);
  return out;
}

const fxprof::model::Thread* thread_of(const Profile& p, uint32_t tid) {
  for (const auto& proc : p.processes)
    for (const auto& t : proc.threads)
      if (t.tid == tid) return &t;
  return nullptr;
}

std::string category_of(const Profile& p, const Marker& m) {
  for (const auto& f : m.fields)
    if (p.strings.get(f.key) == fxprof::model::kMarkerCategoryKey && f.is_string)
      return std::string(p.strings.get(f.string));
  return "";
}

// The program markers named `name` of thread `tid`, by start.
std::vector<const Marker*> markers_named(const Profile& p, uint32_t tid, std::string_view name) {
  std::vector<const Marker*> out;
  if (const auto* t = thread_of(p, tid))
    for (const auto& m : t->markers)
      if (m.program && p.strings.get(m.name) == name) out.push_back(&m);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  return out;
}

// The saved profile keeps times as milliseconds in doubles: nanoseconds read back may be a few off.
constexpr uint64_t kRounding = 1000;

size_t program_markers(const Profile& p) {
  size_t n = 0;
  for (const auto& proc : p.processes)
    for (const auto& t : proc.threads)
      for (const auto& m : t.markers) n += m.program;
  return n;
}

}  // namespace

TEST_CASE("inject: NVTX and ITT ranges become markers with their nesting, threads and times",
          "[e2e][markers]") {
  TempDir dir;
  const std::string out = dir.file("p.json.gz"), truth_file = dir.file("truth.txt");
  auto r = record(out, {test_program("inject_ranges"), truth_file});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("done") != std::string::npos);
  const std::vector<Truth> truth = read_truth(truth_file);
  REQUIRE(truth.size() == 60);  // 2 threads x 5 rounds x 6 ranges
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);

  // Each range once, on its thread, between the program's own clock reads around its calls and at least as
  // long as its sleeps (bounds the scheduler cannot break: the library reads the clock inside the calls);
  // ranges nest (each inner one inside its outer one) as they did in the program.
  std::map<std::pair<uint32_t, std::string>, size_t> seen;
  for (const Truth& t : truth) {
    INFO(t.name << " on " << t.tid);
    auto ms = markers_named(*profile, t.tid, t.name);
    const size_t i = seen[{t.tid, t.name}]++;
    REQUIRE(ms.size() == 5);
    const Marker& m = *ms[i];
    CHECK(m.phase == fxprof::model::MarkerPhase::Interval);
    CHECK(m.start_ns + kRounding >= t.start);
    CHECK(m.end_ns <= t.end + kRounding);
    CHECK(m.end_ns - m.start_ns + kRounding >= t.min);
  }
  const auto main_tid = static_cast<uint32_t>(profile->processes[0].pid);
  uint32_t worker_tid = 0;
  for (const Truth& t : truth)
    if (t.tid != main_tid) worker_tid = t.tid;
  REQUIRE(worker_tid != 0);
  for (uint32_t tid : {main_tid, worker_tid}) {
    auto outer = markers_named(*profile, tid, "nvtx-outer");
    auto inner = markers_named(*profile, tid, "nvtx-inner");
    auto task = markers_named(*profile, tid, "itt-task");
    auto sub = markers_named(*profile, tid, "itt-subtask");
    REQUIRE(outer.size() == 5);
    REQUIRE(inner.size() == 5);
    REQUIRE(task.size() == 5);
    REQUIRE(sub.size() == 5);
    for (size_t i = 0; i < 5; ++i) {
      CHECK(outer[i]->start_ns <= inner[i]->start_ns);
      CHECK(inner[i]->end_ns <= task[i]->start_ns);  // siblings, one after the other
      CHECK(task[i]->start_ns <= sub[i]->start_ns);
      CHECK(sub[i]->end_ns <= task[i]->end_ns);
      CHECK(task[i]->end_ns <= outer[i]->end_ns);
    }
    // Categories: the NVTX domain's name, the ITT domain's, NVTX's default.
    CHECK(category_of(*profile, *inner[0]) == "app");
    CHECK(category_of(*profile, *task[0]) == "inject.itt");
    CHECK(category_of(*profile, *outer[0]) == "NVTX");
    CHECK(category_of(*profile, *markers_named(*profile, tid, "inject.itt")[0]) == "frame");
    // Marks: instants, 5 of each.
    for (const char* mark : {"nvtx-mark", "nvtx-domain-mark"}) {
      auto marks = markers_named(*profile, tid, mark);
      REQUIRE(marks.size() == 5);
      CHECK(marks[0]->phase == fxprof::model::MarkerPhase::Instant);
    }
  }
  // Thread names: NVTX's nvtxNameOsThread given by the main thread to the worker, ITT's
  // __itt_thread_set_name by a thread to itself (which ran one task); names, not markers.
  REQUIRE(thread_of(*profile, worker_tid));
  CHECK(thread_of(*profile, worker_tid)->name == "inject-worker");
  const fxprof::model::Thread* named = nullptr;
  for (const auto& t : profile->processes[0].threads)
    if (t.name == "itt-named") named = &t;
  REQUIRE(named);
  CHECK(markers_named(*profile, named->tid, "itt-task").size() == 1);
  CHECK(markers_named(*profile, named->tid, "itt-named").empty());
  CHECK(markers_named(*profile, main_tid, "inject-worker").empty());
}

TEST_CASE("inject: without fxprof the program runs unchanged, and a variable the user set is kept",
          "[e2e][markers]") {
  TempDir dir;
  // Not under fxprof (the variables unset, as our test client reads an empty one): the same output.
  const std::string truth_file = dir.file("truth.txt");
  CmdOptions plain;
  plain.env = {{"NVTX_INJECTION64_PATH", ""}, {"INTEL_LIBITTNOTIFY64", ""}, {"FXPROF_MARKERS", ""}};
  auto r = run({test_program("inject_ranges"), truth_file}, plain);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out == "done\n");
  CHECK(read_truth(truth_file).size() == 60);

  // The user's NVTX tool stays (named, here one that does not exist: NVTX's calls stay no-ops); ITT's come.
  const std::string out = dir.file("p.json.gz");
  CmdOptions theirs;
  theirs.env = {{"NVTX_INJECTION64_PATH", dir.file("their-tool.so")}};
  r = record(out, {test_program("inject_ranges"), truth_file}, {}, theirs);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("NVTX_INJECTION64_PATH is already set") != std::string::npos);
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  const auto pid = static_cast<uint32_t>(profile->processes[0].pid);
  CHECK(markers_named(*profile, pid, "nvtx-outer").empty());
  CHECK(markers_named(*profile, pid, "itt-task").size() == 5);
  CHECK(program_markers(*profile) == 2 * 5 * 3 + 1);  // ITT tasks, subtasks and frames, the named one's task
}

TEST_CASE("inject: LLVM's OpenMP runtime reports its parallel regions and names its threads",
          "[e2e][markers]") {
  TempDir dir;
  const std::string out = dir.file("p.json.gz"), truth_file = dir.file("truth.txt");
  auto r = record(out, {test_program("omp_regions"), truth_file});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto text = fxprof::read_file(truth_file);
  REQUIRE(text);
  std::istringstream in(*text);
  std::vector<std::pair<uint64_t, uint64_t>> regions;
  for (uint64_t s, e; in >> s >> e;) regions.emplace_back(s, e);
  REQUIRE(regions.size() == 3);
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  const auto pid = static_cast<uint32_t>(profile->processes[0].pid);
  const auto* main = thread_of(*profile, pid);
  REQUIRE(main);
  // libomp's frames of its parallel regions (named "main$omp$parallel:2@FILE:LINE:COLUMN"), on the primary
  // thread, each inside the program's clock reads around its region and at least its 5, 10, 15 ms sleep.
  std::vector<const Marker*> frames;
  for (const auto& m : main->markers)
    if (m.program && profile->strings.get(m.name).find("$omp$parallel") != std::string_view::npos)
      frames.push_back(&m);
  std::sort(frames.begin(), frames.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  REQUIRE(frames.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO("region " << i);
    CHECK(category_of(*profile, *frames[i]) == "frame");
    CHECK(frames[i]->start_ns + kRounding >= regions[i].first);
    CHECK(frames[i]->end_ns <= regions[i].second + kRounding);
    CHECK(frames[i]->end_ns - frames[i]->start_ns + kRounding >= (i + 1) * 5000000);
  }
  // Its worker thread's name (the main thread keeps the process's name).
  bool worker = false;
  for (const auto& t : profile->processes[0].threads) worker |= t.name.find("OMP Worker Thread") == 0;
  CHECK(worker);
}

TEST_CASE("inject: oneTBB reports its parallel_for and names its worker threads", "[e2e][markers]") {
  TempDir dir;
  const std::string out = dir.file("p.json.gz"), truth_file = dir.file("truth.txt");
  auto r = record(out, {test_program("tbb_for"), truth_file});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto text = fxprof::read_file(truth_file);
  REQUIRE(text);
  std::istringstream in(*text);
  std::vector<std::pair<uint64_t, uint64_t>> loops;
  for (uint64_t s, e; in >> s >> e;) loops.emplace_back(s, e);
  REQUIRE(!loops.empty());
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  // One "tbb_parallel_for" interval (category "tbb", its ITT domain) per loop on the main thread, inside the
  // program's clock reads around it.
  const auto pid = static_cast<uint32_t>(profile->processes[0].pid);
  auto fors = markers_named(*profile, pid, "tbb_parallel_for");
  REQUIRE(fors.size() == loops.size());
  for (size_t i = 0; i < loops.size(); ++i) {
    INFO("loop " << i);
    CHECK(category_of(*profile, *fors[i]) == "tbb");
    CHECK(fors[i]->start_ns + kRounding >= loops[i].first);
    CHECK(fors[i]->end_ns <= loops[i].second + kRounding);
  }
  // The worker that took part named itself.
  bool worker = false;
  for (const auto& t : profile->processes[0].threads) worker |= t.name == "TBB Worker Thread";
  CHECK(worker);
}
