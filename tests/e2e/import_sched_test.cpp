// `fxprof import` of perf.data with the scheduler's tracepoints: the off-CPU waits, their reasons and their
// wakers come out as `record` makes them, so `report --critical-path` works on a file only perf recorded.
// The program has a known answer (tests/programs/offcpu/critical_chain.cpp): cp_a waits on cp_b's queue,
// cp_b on cp_c's, cp_c computes 300 ms of its own CPU time; cp_a's critical path is cp_c's CPU, woken
// through cp_b.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/e2e/offcpu_views.h"

using namespace fxprof::test;

namespace {

// cp_a's critical path after `fxprof import` of `data`: the share of other threads' CPU outside run-queue
// delay ([preempted]: the machine's load), and the threads of its longest chain.
struct Path {
  double others = 0;
  std::vector<std::string> chain;
};
Path cp_a_path(const TempDir& dir, const std::string& data) {
  const std::string out = dir.file("p.json.gz");
  auto imp = run({fxprof_bin(), "import", "-s", "-o", out, data});
  INFO(imp.err);
  REQUIRE(imp.status == 0);
  auto rep = run({fxprof_bin(), "report", "--critical-path", "--json", "--thread", "cp_a", out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out)["criticalPath"];
  double others = 0, preempted = 0;
  for (simdjson::dom::element k : simdjson::dom::array(doc["parts"])) {
    if (std::string_view(k["kind"]) == "[preempted]") preempted += double(k["share"]);
    if (std::string_view(k["kind"]) == "other threads' CPU") others += double(k["share"]);
  }
  REQUIRE(preempted < 1);
  Path p{others / (1 - preempted), {}};
  for (simdjson::dom::element c : simdjson::dom::array(doc["chains"])) {
    for (simdjson::dom::element t : simdjson::dom::array(c["threads"]))
      p.chain.emplace_back(std::string_view(t).substr(0, 4));
    break;  // the longest
  }
  return p;
}

// Runs `perf ARGS... critical_chain`, checking its own CPU log: cp_c computed its 300 ms.
void perf_run(std::vector<std::string> args) {
  CpuLog log;
  args.push_back(test_program("critical_chain"));
  auto rec = run(args, {.env = {{CpuLog::kVariable, log.path()}}});
  INFO(rec.err << log.text());
  REQUIRE(rec.status == 0);
  REQUIRE(log.ms("compute") >= 300);
}

}  // namespace

TEST_CASE("import: perf record -g -e sched:sched_switch -e sched:sched_waking --switch-events, critical path",
          "[import][critical]") {
  REQUIRE(geteuid() == 0);  // tracepoints
  TempDir dir;
  const std::string data = dir.file("sched.data");
  perf_run({"perf", "record", "-q", "-g", "-e", "cpu-clock", "-e", "sched:sched_switch", "-e",
            "sched:sched_waking", "--switch-events", "-o", data});
  const Path p = cp_a_path(dir, data);
  CHECK(p.others >= 0.9);  // cp_a's wait was cp_c's compute, through cp_b
  CHECK(p.chain == std::vector<std::string>{"cp_a", "cp_b", "cp_c"});
}

namespace {

// The holder each `Lock wait` names in a profile, counted ("" when it names none).
std::map<std::string, size_t> holders_in(const std::string& profile) {
  std::map<std::string, size_t> out;
  for (const ThreadView& t : threads_of(read_profile_text(profile)))
    for (const MarkerView& m : t.markers)
      if (m.name == "Lock wait") ++out[m.holder];
  return out;
}

// The holder named most often ("" for none).
std::string top_holder(const std::map<std::string, size_t>& holders) {
  std::string top;
  size_t most = 0;
  for (const auto& [name, n] : holders)
    if (!name.empty() && n > most) {
      top = name;
      most = n;
    }
  return top;
}

}  // namespace

// The waker's stack of each sched_waking sample is the holder's (the thread that unlocked), as the eBPF
// tracer's copy is in `record`: the lock waits of a file only perf recorded name who held the lock, and the
// same function `record` names. (Before: waits with wakers but no waker stacks, so no holder at all.)
TEST_CASE("import: perf record -e sched:sched_switch -e sched:sched_waking --call-graph dwarf, lock holders",
          "[import][offcpu]") {
  REQUIRE(geteuid() == 0);  // tracepoints, and the eBPF waker tracer for the live recording
  TempDir dir;
  const std::string data = dir.file("locks.data"), imported = dir.file("imported.json.gz"),
                    live = dir.file("live.json.gz");
  auto rec = run({"perf", "record", "-q", "-e", "sched:sched_switch", "-e", "sched:sched_waking",
                  "--call-graph", "dwarf", "-o", data, test_program("offcpu_locks")});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  auto imp = run({fxprof_bin(), "import", "-s", "-o", imported, data});
  INFO(imp.err);
  REQUIRE(imp.status == 0);
  const auto from_perf = holders_in(imported);
  size_t waits = 0, named = 0;
  for (const auto& [name, n] : from_perf) {
    waits += n;
    named += name.empty() ? 0 : n;
  }
  INFO(waits << " lock waits, " << named << " with a holder; top holder " << top_holder(from_perf));
  REQUIRE(waits > 0);
  CHECK(named * 10 >= waits * 8);  // a copied stack may be cut short of the holder
  auto live_rec = run({fxprof_bin(), "record", "--save-only", "--off-cpu-threshold", "0", kWakersFromStart,
                       "-o", live, "--", test_program("offcpu_locks")});
  INFO(live_rec.err);
  REQUIRE(live_rec.status == 0);
  CHECK(top_holder(from_perf) == top_holder(holders_in(live)));
  CHECK(top_holder(from_perf).find("offcpu_hold_lock") != std::string::npos);
}
