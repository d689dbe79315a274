// `fxprof import` of a perf.data without switch records: a thread's CPU time is what its cpu-clock samples
// say (their periods), not the time between them. The program shares one CPU with a busy loop, so it runs
// about half the time: counting the time between samples (what the builder measures when it sees no
// switches) makes its CPU time about its wall time, twice the CPU it logs.
#include <catch2/catch.hpp>
#include <string>

#include "tests/support/support.h"

using namespace fxprof::test;

TEST_CASE("import: a preempted thread's CPU time is its cpu-clock periods, not its wall time", "[import]") {
  TempDir dir;
  CpuLog busy_log, log;
  CmdOptions busy_opts;
  busy_opts.env[CpuLog::kVariable] = busy_log.path();
  // Spins until the test ends (its destructor stops it); "ready" once it has spun 50 ms on CPU 0.
  Background busy({"taskset", "-c", "0", test_program("rec_busy"), "spin", "600000"}, busy_opts);
  REQUIRE(busy_log.wait_for("ready"));

  const std::string data = dir.file("shared.data");
  CmdOptions o;
  o.env[CpuLog::kVariable] = log.path();
  auto rec = run({"perf", "record", "-q", "-F", "1000", "-g", "-o", data, "--", "taskset", "-c", "0",
                  test_program("rec_busy"), "spin", "400"},
                 o);
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  const double logged_ms = log.ms("main");
  REQUIRE(logged_ms >= 400);

  auto imp = run({fxprof_bin(), "import", "-s", "-q", "-o", dir.file("p.json.gz"), data});
  INFO(imp.err);
  REQUIRE(imp.status == 0);
  auto rep = run({fxprof_bin(), "report", "--json", dir.file("p.json.gz")});
  INFO(rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parse_json(parser, rep.out);
  double cpu_ms = -1;
  uint64_t samples = 0;
  for (simdjson::dom::element sec : doc["sections"].get_array()) {
    if (std::string_view(sec["process"]) != "rec_busy") continue;
    cpu_ms = double(sec["cpuMs"]);
    samples = uint64_t(sec["samples"]);
  }
  INFO("logged " << logged_ms << " ms of CPU, " << samples << " samples, cpuMs " << cpu_ms);
  // ~1 sample a ms of CPU (the README's rule: CPU time x frequency, within 25%).
  CHECK(static_cast<double>(samples) > logged_ms * 0.75);
  CHECK(static_cast<double>(samples) < logged_ms * 1.25);
  // The periods add up to the CPU the program used (its exec and start add a little); preempted half the
  // time, wall time would be about twice that.
  CHECK(cpu_ms > logged_ms * 0.9);
  CHECK(cpu_ms < logged_ms * 1.25);
}
