// `fxprof import` of perf.data with the scheduler's tracepoints: the off-CPU waits, their reasons and their
// wakers come out as `record` makes them, so `report --critical-path` works on a file only perf recorded.
// The program has a known answer (tests/programs/offcpu/critical_chain.cpp): cp_a waits on cp_b's queue,
// cp_b on cp_c's, cp_c computes 300 ms of its own CPU time; cp_a's critical path is cp_c's CPU, woken
// through cp_b.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

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
