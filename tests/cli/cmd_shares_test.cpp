// Shares of on-CPU samples by default (issue 36): a CPU-bound program recorded beside two busy loops on its
// own CPU spends most of its wall-clock time [preempted], which is the machine's state, not the program's.
// The summary after recording, report and the diff gate rank its on-CPU samples, whose shares follow from
// its CPU time (exp_shares spins for a measured share of its own CPU time); --wall ranks every sample.
#include <catch2/catch.hpp>
#include <string>

#include "tests/cli/sink_cli.h"

using namespace fxprof::test;

namespace {

// Two busy loops pinned to CPU 0 while the object lives: the program (pinned there too) gets a third of it.
struct BusyLoops {
  Background a{{"taskset", "-c", "0", "sh", "-c", "while :; do :; done"}};
  Background b{{"taskset", "-c", "0", "sh", "-c", "while :; do :; done"}};
};

// Records `exp_shares [variant]` on CPU 0 into `path`; returns record's stderr.
std::string record_shares(const std::string& path, const std::string& variant = "") {
  std::vector<std::string> argv{
      fxprof_bin(), "record", "--save-only", "--symbolicate",           "-o", path, "--",
      "taskset",    "-c",     "0",           test_program("exp_shares")};
  if (!variant.empty()) argv.push_back(variant);
  auto r = run(argv);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return r.err;
}

}  // namespace

TEST_CASE("record's summary and report rank on-CPU samples: the hottest function first under load") {
  TempDir dir;
  std::string err;
  {
    BusyLoops load;
    err = record_shares(dir.file("p.json.gz"));
  }
  // "fxprof: top self: hot_loop(long) 40.1%, ... (on-CPU); preempted 66.0% of wall time"
  const size_t at = err.find("fxprof: top self: ");
  REQUIRE(at != std::string::npos);
  const std::string line = err.substr(at, err.find('\n', at) - at);
  INFO(line);
  CHECK(line.starts_with("fxprof: top self: hot_loop(long) "));
  CHECK(line.find("preempted") != std::string::npos);
  CHECK(line.find("of wall time") != std::string::npos);

  auto cpu = run({fxprof_bin(), "report", "--limit", "1", dir.file("p.json.gz")});
  INFO(cpu.out << cpu.err);
  REQUIRE(cpu.status == 0);
  CHECK(cpu.out.find("shares of on-CPU samples") != std::string::npos);
  CHECK(cpu.out.find("  off-CPU: ") != std::string::npos);
  CHECK(cpu.out.find("[preempted]") == std::string::npos);
  CHECK(cpu.out.find("hot_loop(long)") != std::string::npos);
  // --wall: every sample, as the Firefox Profiler's call tree counts them; the waits for the CPU lead.
  auto wall = run({fxprof_bin(), "report", "--wall", "--limit", "1", "-i", dir.file("p.json.gz")});
  INFO(wall.out << wall.err);
  REQUIRE(wall.status == 0);
  CHECK(wall.out.find("shares of wall-clock samples") != std::string::npos);
  CHECK(wall.out.find("[preempted]") != std::string::npos);
  // The folded export counts on-CPU samples unless --wall.
  auto folded = run({fxprof_bin(), "export", "folded", dir.file("p.json.gz"), "-o", "-"});
  CHECK(folded.status == 0);
  CHECK(folded.out.find("[preempted]") == std::string::npos);
  auto folded_wall = run({fxprof_bin(), "export", "folded", "--wall", dir.file("p.json.gz"), "-o", "-"});
  CHECK(folded_wall.out.find("[preempted]") != std::string::npos);
}

TEST_CASE(
    "diff --fail-above under load: the same program passes, 30 points of CPU moved into a new function "
    "fail") {
  TempDir dir;
  {
    BusyLoops load;
    record_shares(dir.file("a1.json.gz"));
    record_shares(dir.file("a2.json.gz"));
    record_shares(dir.file("moved.json.gz"), "moved");
  }
  auto diff = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{fxprof_bin(), "diff", "-o", dir.file("d.svg")};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
  };
  // One run per side: the noise is the samples' own (the sampling error of each share), not "spread 0".
  auto same = diff({"--fail-above", "10", dir.file("a1.json.gz"), dir.file("a2.json.gz")});
  INFO(same.out << same.err);
  CHECK(same.status == 0);
  CHECK(same.out.find("fxprof: gate passed") != std::string::npos);
  CHECK(same.out.find("[preempted]") == std::string::npos);
  // --wall compares on-CPU and blocked samples, never preempted ones.
  auto wall = diff({"--wall", "--fail-above", "10", dir.file("a1.json.gz"), dir.file("a2.json.gz")});
  INFO(wall.out << wall.err);
  CHECK(wall.status == 0);
  CHECK(wall.out.find("[preempted]") == std::string::npos);

  auto moved = diff({"--fail-above", "10", dir.file("a1.json.gz"), dir.file("moved.json.gz")});
  INFO(moved.out << moved.err);
  CHECK(moved.status == 3);
  CHECK(moved.out.find("fxprof: gate failed: moved_loop(long) self share grew +") != std::string::npos);
  // --function takes the bare name as well as the signature; a name in neither profile is an error.
  for (const char* name : {"moved_loop", "moved_loop(long)"}) {
    auto one =
        diff({"--fail-above", "10", "--function", name, dir.file("a1.json.gz"), dir.file("moved.json.gz")});
    INFO(name << ": " << one.out << one.err);
    CHECK(one.status == 3);
  }
  auto none = diff({"--fail-above", "10", "--function", "no_such_function", dir.file("a1.json.gz"),
                    dir.file("moved.json.gz")});
  CHECK(none.status == 1);
  CHECK(none.err.find("--function no_such_function: no function of that name in either profile") !=
        std::string::npos);
}
