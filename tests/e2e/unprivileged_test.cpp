// The unprivileged path: with kernel.perf_event_paranoid 2 an ordinary user can profile their own programs,
// user space only. The test creates a user and runs fxprof as that user.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "base/fd.h"
#include "tests/e2e/e2e.h"

using namespace fxprof::test;

TEST_CASE("an ordinary user records their own program, user space only", "[e2e][unprivileged]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root and drops to the test user here
  auto paranoid = fxprof::read_file("/proc/sys/kernel/perf_event_paranoid");
  REQUIRE(paranoid);
  INFO("perf_event_paranoid = " << *paranoid);
  REQUIRE(std::stoi(*paranoid) == 2);

  TempDir dir;
  std::string out = dir.file("user.json.gz");
  CmdOptions opts = as_test_user(dir);
  CpuLog cpu;
  opts.env[CpuLog::kVariable] = cpu.path();
  auto r = record(out, {test_program("e2e_threads")}, {}, opts);
  INFO(r.err);
  REQUIRE(r.status == 0);
  // One notice that says why kernel frames are missing.
  CHECK(r.err.find("perf_event_paranoid") != std::string::npos);
  std::string text = read_profile_text(out);
  auto problems = lint_gecko_profile(text);
  CHECK(problems.empty());
  auto threads = summarize(text);
  const ThreadSummary* main_t = find_thread(threads, "GeckoMain");
  REQUIRE(main_t != nullptr);
  CHECK_SAMPLES(main_t->samples, cpu.ms("main"), 1000);
  for (const auto& t : threads) CHECK(t.kernel_frames == 0);
  REQUIRE(find_thread(threads, "e2e-alpha") != nullptr);

  // Main-rooted stacks, symbolicated through our server. The main thread is selected by name: which thread
  // profiler-cli selects first depends on CPU use, so under load it is often a worker.
  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  REQUIRE(cli.select_thread("GeckoMain"));
  auto tree = cli.cmd({"thread", "samples-top-down"});
  INFO(tree.out);
  CHECK(tree.out.find("e2e_threads!main") != std::string::npos);
  CHECK(tree.out.find("main_spin") != std::string::npos);
}

TEST_CASE("an ordinary user's -p OWN,OTHER names the pid it may not attach to", "[e2e][unprivileged]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  CmdOptions opts = as_test_user(dir);
  // The user's own process first (the probe passes on it), then one of root's: this test's own process.
  Background own({"sleep", "60"}, opts);
  const std::string root_pid = std::to_string(::getpid());
  auto r = run({fxprof_bin(), "record", "--save-only", "-o", dir.file("p.json"), "-d", "1", "-p",
                std::to_string(own.pid()) + "," + root_pid},
               opts);
  CHECK(r.status == 1);
  CHECK(
      r.err.find("fxprof: cannot attach to pid " + root_pid +
                 ": it belongs to another user (Permission denied); run fxprof as that user or as root\n") !=
      std::string::npos);
}
