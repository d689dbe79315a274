// `fxprof record -a`: every process on the machine. Three programs of ours run while it records (one running
// before it starts, one forked mid-way, one that starts and ends within it, tests/programs/e2e/sys_load.cpp):
// each is its own process, named by its command line, with its functions and as many samples as its CPU time
// says; and an ordinary user gets the one-line error.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "base/fd.h"
#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

struct ProcessSummary {
  size_t samples = 0;  // on-CPU samples of all its threads
  size_t threads = 0;
  bool has_function = false;  // a thread's string table names `function`
};

// The processes whose name starts with `prefix`, summed; `function` looked for in their threads' strings.
ProcessSummary process(const std::string& text, const std::vector<ThreadSummary>& threads,
                       const std::string& prefix, const std::string& function) {
  ProcessSummary p;
  for (const ThreadSummary& t : threads)
    if (t.process.rfind(prefix, 0) == 0) {
      p.samples += t.samples;
      ++p.threads;
    }
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  for (simdjson::dom::element proc : simdjson::dom::array(doc["processes"]))
    for (simdjson::dom::element t : simdjson::dom::array(proc["threads"])) {
      if (std::string_view(t["processName"]).rfind(prefix, 0) != 0) continue;
      for (simdjson::dom::element s : simdjson::dom::array(t["stringTable"]))
        p.has_function |= std::string_view(s).find(function) != std::string_view::npos;
    }
  return p;
}

}  // namespace

TEST_CASE("record -a: every process, named, with its functions and its CPU time", "[e2e][system]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  const std::string in = dir.file("in"), out = dir.file("out"), profile = dir.file("all.json.gz");
  REQUIRE(mkfifo(in.c_str(), 0600) == 0);
  REQUIRE(mkfifo(out.c_str(), 0600) == 0);
  CpuLog cpu;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = cpu.path();
  const std::string sys = test_program("e2e_sys");
  // Running before the recording starts: attached from /proc (command line, libraries from its maps).
  Background attached({sys, "attached", in, out}, opts);
  REQUIRE(cpu.wait_for("waiting"));
  // The driver starts the attached one's work, runs the forked and the short one, and its end stops it.
  // Frame pointers (e2e_sys is built with them): whether the reader keeps up with DWARF samples of the whole
  // machine depends on what else runs; 150-byte samples it always does.
  auto r = run({fxprof_bin(), "record", "-a", "--duration", "100", "--call-graph", "fp", "--save-only",
                "--symbolicate", "-o", profile, "--", sys, "driver", in, out},
               opts);
  INFO(r.err);
  INFO(cpu.text());
  REQUIRE(r.status == 0);
  CHECK(r.err.find("idle") != std::string::npos);  // the idle CPUs' share, not a thread
  const std::string text = read_profile_text(profile);
  CHECK(lint_gecko_profile(text).empty());
  const auto threads = summarize(text);
  for (const ThreadSummary& t : threads) {
    CHECK(t.pid != 0);  // the idle task is no thread
    CHECK(t.tid != 0);
  }

  const ProcessSummary a = process(text, threads, "e2e_sys attached " + in, "attached_spin");
  const ProcessSummary f = process(text, threads, "e2e_sys forked", "forked_spin");
  const ProcessSummary s = process(text, threads, "e2e_sys short", "short_spin");
  const ProcessSummary d = process(text, threads, "e2e_sys driver " + in, "main");
  CHECK(a.threads == 1);
  CHECK(f.threads == 1);
  CHECK(s.threads == 1);
  CHECK(d.threads >= 1);
  CHECK(a.has_function);
  CHECK(f.has_function);
  CHECK(s.has_function);
  CHECK_SAMPLES(a.samples, cpu.ms("attached"), 1000);
  CHECK_SAMPLES(f.samples, cpu.ms("forked"), 1000);
  CHECK_SAMPLES(s.samples, cpu.ms("short"), 1000);

  // Kernel threads are one process, not one each.
  size_t kernel_processes = 0;
  for (const ThreadSummary& t : threads)
    kernel_processes += t.process == "[kernel threads]" && t.tid == t.pid;
  CHECK(kernel_processes <= 1);
}

TEST_CASE("record -a: kernel threads, interrupts and softirqs are categories of their own", "[e2e][system]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  const std::string profile = dir.file("all.json.gz");
  CpuLog cpu;
  CmdOptions opts;
  opts.env[CpuLog::kVariable] = cpu.path();
  // Loopback TCP: the receive side runs as a softirq when the sender re-enables bottom halves, in the
  // sender's time (about a third of it here).
  auto r = run({fxprof_bin(), "record", "-a", "--duration", "100", "--call-graph", "fp", "--save-only",
                "--symbolicate", "-o", profile, "--", test_program("e2e_sys"), "loopback"},
               opts);
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(cpu.count("loopback") == 1);  // it ran to its end
  CHECK(r.err.find("kernel threads") != std::string::npos);
  CHECK(r.err.find("softirqs 0.0%") == std::string::npos);
  const std::string text = read_profile_text(profile);
  CHECK(lint_gecko_profile(text).empty());
  size_t sender = 0, softirq = 0;
  for (const ThreadSummary& t : summarize(text)) {
    INFO(t.process << " " << t.name);
    if (t.process.rfind("e2e_sys loopback", 0) == 0) {
      sender += t.samples;
      softirq += t.on_cpu_by_category.count("Softirq") ? t.on_cpu_by_category.at("Softirq") : 0;
    }
    // A kernel thread's kernel time is never a program's ("Kernel"); an idle or sleeping one has none.
    if (t.process == "[kernel threads]") CHECK(t.on_cpu_by_category.count("Kernel") == 0);
  }
  INFO("sender samples " << sender << ", of them in softirqs " << softirq);
  REQUIRE(sender > 0);
  CHECK(softirq * 20 >= sender);  // at least 5%
}

TEST_CASE("record -a --duration stops by itself, and --per-cpu adds a track per CPU", "[e2e][system]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  const std::string profile = dir.file("d.json.gz");
  CmdOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto r = run({fxprof_bin(), "record", "-a", "--duration", "0.5", "--per-cpu", "--call-graph", "fp",
                "--save-only", "--no-symbolicate", "-o", profile},
               opts);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(!r.timed_out);
  const auto threads = summarize(read_profile_text(profile));
  // Every CPU sample is also on its CPU's track (the idle ones too), the CPUs' process apart from the others.
  size_t cpu_tracks = 0, cpu_samples = 0, thread_samples = 0;
  for (const ThreadSummary& t : threads) {
    CHECK(t.tid != 0);
    if (t.process == "CPUs") {
      ++cpu_tracks;
      cpu_samples += t.samples + t.off_cpu_samples;
    } else {
      thread_samples += t.samples;
    }
  }
  CHECK(cpu_tracks >= 1);
  CHECK(cpu_tracks <= static_cast<size_t>(sysconf(_SC_NPROCESSORS_CONF)));
  CHECK(cpu_samples >= thread_samples);
  REQUIRE(find_thread(threads, "CPU 0") != nullptr);
}

TEST_CASE("record -a as an ordinary user: one line that says why", "[e2e][system][unprivileged]") {
  REQUIRE(geteuid() == 0);
  auto paranoid = fxprof::read_file("/proc/sys/kernel/perf_event_paranoid");
  REQUIRE(paranoid);
  REQUIRE(std::stoi(*paranoid) > 0);
  TempDir dir;
  CmdOptions opts = as_test_user(dir);
  auto r = run({fxprof_bin(), "record", "-a", "--duration", "1", "--save-only", "-o", dir.file("x.json.gz")},
               opts);
  INFO(r.err);
  CHECK(r.status != 0);
  // Said before anything is opened (the probe's own refusal would blame seccomp: paranoid 2 allows a user's
  // own processes, not every CPU's).
  CHECK(r.err.find("record -a needs root or kernel.perf_event_paranoid <= 0") != std::string::npos);
  CHECK(r.err.find("perf_event_paranoid=0") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}
