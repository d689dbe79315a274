// Ctrl+C as a terminal sends it (to the whole foreground process group), twice, and a sampling rate above
// the kernel's limit.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "base/fd.h"
#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

std::vector<std::string> record_argv(const std::string& out) {
  return {fxprof_bin(), "record", "--save-only", "--no-symbolicate",
          "-o",         out,      "--",          test_program("e2e_spin")};
}

}  // namespace

TEST_CASE("Ctrl+C reaches the program, and fxprof writes what it has and exits as the program did", "[e2e]") {
  TempDir dir;
  std::string out = dir.file("ctrl-c.json.gz");
  CpuLog cpu;
  Background fx(record_argv(out), {.env = {{CpuLog::kVariable, cpu.path()}}});
  REQUIRE(cpu.wait_for("ready"));  // the program runs, sampled, 100 ms of CPU into its work
  ::kill(-fx.pid(), SIGINT);       // what a terminal does: the whole foreground process group
  int status = fx.stop(0);
  INFO(fx.err());
  CHECK(status == 128 + SIGINT);
  REQUIRE(::access(out.c_str(), F_OK) == 0);
  std::string text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  auto threads = summarize(text);
  const ThreadSummary* t = find_thread(threads, "GeckoMain");
  REQUIRE(t != nullptr);
  CHECK_SAMPLES(t->samples, cpu.ms("main"), 1000);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"ctrl-c.json.gz"});
}

TEST_CASE("a second Ctrl+C while the profile is written leaves no partial file", "[e2e]") {
  TempDir dir;
  std::string out = dir.file("twice.json.gz");
  CpuLog cpu;
  Background fx(record_argv(out), {.env = {{CpuLog::kVariable, cpu.path()}}});
  REQUIRE(cpu.wait_for("ready"));
  ::kill(-fx.pid(), SIGINT);
  // Second Ctrl+Cs spread over the next 40 ms, while fxprof writes the profile.
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(fx.pid(), SIGINT);
  }
  int status = fx.stop(0);
  INFO(fx.err());
  CHECK(status != -1);
  // Whatever the timing, the folder holds the complete profile or nothing: never a temporary file.
  auto names = list_dir(dir.path());
  if (!names.empty()) {
    CHECK(names == std::vector<std::string>{"twice.json.gz"});
    CHECK(lint_gecko_profile(read_profile_text(out)).empty());
  }
}

TEST_CASE("a rate above perf_event_max_sample_rate is lowered with one notice", "[e2e][serial]") {
  // The knob is lowered and restored by a shell around fxprof, so that it comes back even if this test
  // process dies (a sanitizer abort skips destructors).
  TempDir dir;
  std::string out = dir.file("clamped.json");
  CpuLog cpu;
  const std::string script =
      "knob=/proc/sys/kernel/perf_event_max_sample_rate; orig=$(cat $knob); trap 'echo $orig > $knob' EXIT; "
      "echo 400 > $knob && \"$@\"";
  auto r = run({"sh", "-c", script, "sh", fxprof_bin(), "record", "--save-only", "--no-symbolicate", "-F",
                "1000", "-o", out, "--", test_program("e2e_threads")},
               {.env = {{CpuLog::kVariable, cpu.path()}}});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("fxprof: sampling at 400 Hz, the kernel's limit (kernel.perf_event_max_sample_rate), "
                   "instead of 1000 Hz") != std::string::npos);
  auto threads = summarize(read_profile_text(out));
  const ThreadSummary* t = find_thread(threads, "GeckoMain");
  REQUIRE(t != nullptr);
  // 300 ms of CPU at 400 Hz: about 120 samples, not 300.
  CHECK_SAMPLES(t->samples, cpu.ms("main"), 400);
}
