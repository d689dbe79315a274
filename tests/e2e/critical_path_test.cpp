// The critical path (model/critical_path.h) end to end: `fxprof record` (off-CPU with the eBPF waker tracer:
// the suite runs as root) on programs with known answers (tests/programs/offcpu/critical_chain.cpp), then
// `fxprof report --critical-path --json` and `fxprof export folded --critical-path` on the saved profile.
// Shares are of the path's time outside run-queue delay ([preempted]): how long the scheduler kept a thread
// waiting for a CPU depends on the machine's load, what the path ran does not.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

struct PathShares {
  double function = 0;  // total share of the function asked for, on a thread other than the one asked about
  double preempted = 0;
  std::string text;
};

PathShares report_path(const std::string& profile, const std::string& function,
                       std::vector<std::string> extra) {
  std::vector<std::string> cmd{fxprof_bin(), "report", "--critical-path", "--json"};
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  cmd.push_back(profile);
  auto rep = run(cmd);
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  PathShares out;
  out.text = rep.out;
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out)["criticalPath"];
  for (simdjson::dom::element f : simdjson::dom::array(doc["functions"]))
    if (std::string_view(f["function"]).find(function) != std::string_view::npos && !bool(f["own"]))
      out.function += double(f["total"]);
  for (simdjson::dom::element k : simdjson::dom::array(doc["parts"]))
    if (std::string_view(k["kind"]) == "[preempted]") out.preempted += double(k["share"]);
  return out;
}

}  // namespace

TEST_CASE("critical path: A waits on B's queue, B on C's, C computes: A's path is C's compute",
          "[e2e][critical]") {
  REQUIRE(geteuid() == 0);  // the wakers come from the eBPF tracer
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  CpuLog log;
  auto r = record(out, {test_program("critical_chain")}, {}, {.env = {{CpuLog::kVariable, log.path()}}});
  INFO(r.err << log.text());
  REQUIRE(r.status == 0);
  REQUIRE(log.ms("compute") >= 300);
  const PathShares s = report_path(out, "cp_compute", {"--thread", "cp_a"});
  INFO(s.text);
  REQUIRE(s.preempted < 1);
  CHECK(s.function / (1 - s.preempted) >= 0.9);

  // The folded path: the same compute, under C's root frame.
  auto folded =
      run({fxprof_bin(), "export", "folded", "--critical-path", "--thread", "cp_a", out, "-o", "-"});
  INFO(folded.err);
  REQUIRE(folded.status == 0);
  uint64_t all = 0, compute = 0;
  for (std::string_view rest = folded.out; !rest.empty();) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    const size_t sp = line.rfind(' ');
    if (sp == std::string_view::npos) continue;
    const uint64_t n = std::stoull(std::string(line.substr(sp + 1)));
    all += n;
    if (line.starts_with("cp_c (tid ") && line.find("cp_compute") != std::string_view::npos) compute += n;
  }
  INFO(folded.out.substr(0, 2000));
  CHECK(all > 0);
  CHECK(double(compute) / double(all) >= 0.9 * (1 - s.preempted));
}

TEST_CASE("critical path: a request waiting on a pipe to a child process crosses into the child's function",
          "[e2e][critical]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  CpuLog log;
  auto r = record(out, {test_program("critical_chain"), "process"}, {},
                  {.env = {{CpuLog::kVariable, log.path()}}});
  INFO(r.err << log.text());
  REQUIRE(r.status == 0);
  REQUIRE(log.ms("child_compute") >= 300);
  const PathShares s = report_path(out, "cp_child_compute", {});  // the main thread of the first process
  INFO(s.text);
  REQUIRE(s.preempted < 1);
  CHECK(s.function / (1 - s.preempted) >= 0.8);

  // A thread that is not there, a range outside it: one line each.
  auto bad = run({fxprof_bin(), "report", "--critical-path", "--thread", "nosuch", out});
  CHECK(bad.status != 0);
  CHECK(bad.err.find("no thread 'nosuch'") != std::string::npos);
  auto range = run({fxprof_bin(), "report", "--critical-path", "--time-range", "5,1", out});
  CHECK(range.status != 0);
  CHECK(range.err.find("--time-range") != std::string::npos);
}
