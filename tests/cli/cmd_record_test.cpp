// `fxprof record --export FORMAT` writes the exports beside the profile; the summary names the top self
// functions unless -q.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "tests/cli/sink_cli.h"

using namespace fxprof::test;

TEST_CASE("record --export writes folded, pprof and svg beside the profile, and the top functions") {
  TempDir dir;
  auto r = run({fxprof_bin(), "record", "--save-only", "--export", "folded", "--export", "pprof", "--export",
                "svg", "-o", dir.file("run.json.gz"), "--", test_program("exp_work")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  for (const char* f : {"run.json.gz", "run.folded", "run.pb.gz", "run.svg"}) {
    INFO(f);
    CHECK(!read_profile_text(dir.file(f)).empty());
    const bool reported = std::string(f) == "run.json.gz" ||
                          r.err.find(std::string("wrote ") + dir.file(f)) != std::string::npos;
    CHECK(reported);
  }
  // The folded export agrees with the profile written in the same run.
  CHECK(read_profile_text(dir.file("run.folded")).find("main;alpha(long)") != std::string::npos);
  // "fxprof: top self: beta(long) 33.1%, ..." with three named functions of the program among the five.
  size_t at = r.err.find("fxprof: top self: ");
  REQUIRE(at != std::string::npos);
  std::string line = r.err.substr(at, r.err.find('\n', at) - at);
  INFO(line);
  CHECK(line.find("alpha(long) ") != std::string::npos);
  CHECK(line.find("beta(long) ") != std::string::npos);
  CHECK(line.find('%') != std::string::npos);
}

TEST_CASE("record -q prints no top functions; a bad --export is a usage error") {
  TempDir dir;
  auto r = run({fxprof_bin(), "record", "-q", "--save-only", "-o", dir.file("p.json.gz"), "--",
                test_program("exp_work")});
  REQUIRE(r.status == 0);
  CHECK(r.err.find("top self") == std::string::npos);
  // Nor the debug files not found (Debian's libstdc++ has none without libstdc++6-dbgsym): they are in the
  // profile's data-quality notes.
  CHECK(r.err.find("debug") == std::string::npos);
  CHECK(r.err.find("Debug") == std::string::npos);
  auto bad = run({fxprof_bin(), "record", "--export", "png", "--", "true"});
  CHECK(bad.status == 2);
  CHECK(bad.err == "fxprof record: --export must be folded, pprof or svg (try `fxprof record --help`)\n");
}

TEST_CASE("record -v prints each pass's time, in order, the read pass holding the program's run") {
  TempDir dir;
  auto r = run({fxprof_bin(), "record", "-v", "-q", "--cpu-only", "--save-only", "--no-symbolicate", "-o",
                dir.file("p.json.gz"), "--", test_program("exp_work")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // "fxprof: passes: plan 0.1 ms, start 3.9 ms, read 512.3 ms, drain 0.2 ms, finish 30.1 ms"
  size_t at = r.err.find("fxprof: passes: ");
  REQUIRE(at != std::string::npos);
  std::string line = r.err.substr(at, r.err.find('\n', at) - at);
  double ms[5] = {-1, -1, -1, -1, -1};
  REQUIRE(std::sscanf(line.c_str(),
                      "fxprof: passes: plan %lf ms, start %lf ms, read %lf ms, drain %lf ms, finish %lf ms",
                      &ms[0], &ms[1], &ms[2], &ms[3], &ms[4]) == 5);
  for (double v : ms) CHECK(v >= 0);
  // The program runs for a while (its CPU work); everything else is bookkeeping around it.
  CHECK(ms[2] > ms[0] + ms[1] + ms[3]);
  // Without -v: no such line.
  auto quiet = run({fxprof_bin(), "record", "-q", "--cpu-only", "--save-only", "--no-symbolicate", "-o",
                    dir.file("q.json.gz"), "--", test_program("exp_work")});
  REQUIRE(quiet.status == 0);
  CHECK(quiet.err.find("passes:") == std::string::npos);
}

TEST_CASE("record -p of an idle parent whose child works: an error naming the child, no file") {
  // sh starts the busy child, then becomes `sleep`: the pid given to -p never runs while it is recorded.
  TempDir dir;
  CpuLog cpu;
  Background parent({"sh", "-c", test_program("e2e_spin") + " & echo child $!; exec sleep 60"},
                    {.env = {{CpuLog::kVariable, cpu.path()}}});
  const std::string line = parent.wait_for_line("child ");
  REQUIRE(!line.empty());
  const int child = std::stoi(line.substr(line.find("child ") + 6));
  struct StopChild {
    int pid;
    ~StopChild() { ::kill(pid, SIGTERM); }
  } stop_child{child};
  REQUIRE(cpu.wait_for("ready"));  // the child runs (and has exec'd)
  const std::string out = dir.file("idle.json.gz");
  auto r = run(
      {fxprof_bin(), "record", "--save-only", "-d", "0.5", "-o", out, "-p", std::to_string(parent.pid())});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(access(out.c_str(), F_OK) != 0);
  CHECK(r.err.find("fxprof: no samples: pid " + std::to_string(parent.pid()) + " (sleep) used no CPU") == 0);
  CHECK(r.err.find(std::to_string(child) + " (e2e_spin)") != std::string::npos);
  CHECK(r.err.find("Add them: -p " + std::to_string(parent.pid()) + "," + std::to_string(child) + "\n") !=
        std::string::npos);
}

TEST_CASE("record of a program too short for one sample: an error, no file") {
  TempDir dir;
  const std::string out = dir.file("short.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "-F", "1", "-o", out, "--", "true"});
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(access(out.c_str(), F_OK) != 0);
  CHECK(r.err.find("fxprof: no samples: true and what it started used less CPU than one sampling interval") ==
        0);
}

// issue 25 item 6: the binaries' symbols are loaded while the program runs (passes/preload.h), so that
// after its exit only lookups remain; -v's after-the-recording line says how many were loaded by the exit.
TEST_CASE("record -v: the program's binaries are loaded while it runs, none with --no-symbolicate") {
  TempDir dir;
  // "fxprof: after the recording: symbols 0.4 ms (2 binaries, 45 addresses; 2 binaries loaded while it ran),"
  auto loaded = [](const std::string& err, size_t& binaries) {
    size_t at = err.find("fxprof: after the recording: ");
    REQUIRE(at != std::string::npos);
    const std::string line = err.substr(at, err.find('\n', at) - at);
    INFO(line);
    double ms = -1;
    size_t addresses = 0, preloaded = 0;
    REQUIRE(
        std::sscanf(line.c_str(),
                    "fxprof: after the recording: symbols %lf ms (%zu binaries, %zu addresses; %zu binaries "
                    "loaded while it ran)",
                    &ms, &binaries, &addresses, &preloaded) == 4);
    return preloaded;
  };
  // exp_work runs 300 ms of CPU: time enough to load at least the largest of its binaries (libc, first) on
  // the other CPU, however loaded the machine (the loading thread runs at normal priority).
  auto r = run({fxprof_bin(), "record", "-v", "-q", "--cpu-only", "--save-only", "-o", dir.file("p.json.gz"),
                "--", test_program("exp_work")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  size_t binaries = 0;
  const size_t preloaded = loaded(r.err, binaries);
  CHECK(binaries >= 2);   // exp_work and libc, at least
  CHECK(preloaded >= 1);  // without the preload: 0, everything loaded after the exit
  // The names are the same as a lookup after the exit finds: the profile is baked and names the functions.
  const std::string text = read_profile_text(dir.file("p.json.gz"));
  CHECK(text.find("alpha(long)") != std::string::npos);
  CHECK(text.find("\"presymbolicated\":true") != std::string::npos);
  // Frames left raw: nothing is loaded.
  auto raw = run({fxprof_bin(), "record", "-v", "-q", "--cpu-only", "--save-only", "--no-symbolicate", "-o",
                  dir.file("q.json.gz"), "--", test_program("exp_work")});
  INFO(raw.err);
  REQUIRE(raw.status == 0);
  CHECK(loaded(raw.err, binaries) == 0);
  CHECK(binaries == 0);
}
