// Recorder tests in attach mode and for how recordings end: attaching to running programs and the processes
// they start, SIGTERM to fxprof in attach and launch mode, --duration, a 10 kHz rate's losses
// (fixtures: recorder_fixtures.h).
#include <elf.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "recorder/recorder.h"
#include "tests/recorder/recorder_fixtures.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::CpuLog;
using fxprof::test::process_cpu_ms;
using fxprof::test::test_program;
extern char** environ;
using namespace fxprof::test::recorder_fixtures;

TEST_CASE("recorder: attach to a running program that keeps running", "[recorder][attach]") {
  CpuLog cpu;
  Spawned prog({test_program("rec_busy"), "spin", "20000", "2"}, cpu);
  REQUIRE(prog.pid() > 0);
  REQUIRE(cpu.wait_for("ready"));  // its worker thread exists
  recorder::Options o;
  o.pids = {prog.pid()};
  o.duration_s = 1;
  o.call_graph = recorder::CallGraph::FramePointer;
  double cpu_before = process_cpu_ms(prog.pid());
  auto r = recorder::record(o);
  double cpu_used = process_cpu_ms(prog.pid()) - cpu_before;  // a little more than while recording
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  CHECK(prog.alive());
  const model::Process& proc = r->profile.processes.at(0);
  CHECK(proc.pid == static_cast<uint32_t>(prog.pid()));
  CHECK(proc.name == "rec_busy");
  CHECK(find_thread(proc, "spinner-1") != nullptr);
  CHECK_SAMPLES(count_samples(proc), recorded_cpu_ms(proc), 1000);
  CHECK(recorded_cpu_ms(proc) <= cpu_used + 5);
  Symbolizer sym;
  size_t hits = 0;
  for (const model::Thread& t : proc.threads)
    for (const model::Sample& s : t.samples)
      hits += contains(names_of(r->profile, proc, s.stack, sym), "rec_busy_spin");
  CHECK(hits >= count_samples(proc) * 8 / 10);
}

TEST_CASE("recorder: attach follows the processes the program starts afterwards", "[recorder][attach]") {
  CpuLog cpu;
  Spawned loop({"/bin/sh", "-c", "while true; do " + test_program("rec_busy") + " spin 30; done"}, cpu);
  REQUIRE(cpu.wait_for("main"));  // the loop runs its children
  // The recording ends once ten more children ran their 30 ms of CPU: a fixed duration recorded only a few
  // startups on a loaded machine (attaching took most of it), so the count follows the children's CPU.
  const size_t children_before = cpu.count("main");
  std::thread killer([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // only the recorder's signalfd may take it
    cpu.wait_for("main", children_before + 10);
    kill(getpid(), SIGTERM);
  });
  recorder::Options o;
  o.pids = {loop.pid()};
  auto r = recorder::record(o);
  killer.join();
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  CHECK(p.processes.at(0).pid == static_cast<uint32_t>(loop.pid()));
  CHECK(p.processes.at(0).name == "sh");
  // Children start (ld.so, libc init: a few samples) and spin (most of them) while we record.
  size_t children = 0, samples = 0, hits = 0;
  Symbolizer sym;
  for (const model::Process& proc : p.processes) {
    if (proc.name != "rec_busy" || count_samples(proc) == 0) continue;
    ++children;
    for (const model::Sample& s : proc.threads.at(0).samples) {
      ++samples;
      hits += contains(names_of(p, proc, s.stack, sym), "rec_busy_spin");
    }
  }
  CHECK(children >= 1);
  CHECK(hits >= samples / 2);
}

TEST_CASE("recorder: attach to two programs", "[recorder][attach]") {
  CpuLog cpu;
  Spawned a({test_program("rec_busy"), "spin", "20000"}, cpu);
  Spawned b({test_program("rec_busy"), "spin", "20000"}, cpu);
  REQUIRE(cpu.wait_for("ready", 2));
  recorder::Options o;
  o.pids = {a.pid(), b.pid()};
  o.duration_s = 1;
  double a_before = process_cpu_ms(a.pid()), b_before = process_cpu_ms(b.pid());
  auto r = recorder::record(o);
  double a_used = process_cpu_ms(a.pid()) - a_before, b_used = process_cpu_ms(b.pid()) - b_before;
  REQUIRE(r.ok());
  for (auto [pid, used] : {std::pair{a.pid(), a_used}, std::pair{b.pid(), b_used}}) {
    const model::Process* proc = nullptr;
    for (const model::Process& p : r->profile.processes)
      if (p.pid == static_cast<uint32_t>(pid)) proc = &p;
    REQUIRE(proc);
    CHECK_SAMPLES(count_samples(*proc), recorded_cpu_ms(*proc), 1000);
    CHECK(recorded_cpu_ms(*proc) <= used + 5);
  }
  CHECK(a.alive());
  CHECK(b.alive());
}

TEST_CASE("recorder: in attach mode SIGTERM ends the recording and the profile is kept",
          "[recorder][attach]") {
  CpuLog cpu;
  Spawned prog({test_program("rec_busy"), "spin", "20000"}, cpu);
  REQUIRE(cpu.wait_for("ready"));
  const double cpu_before = process_cpu_ms(prog.pid());
  std::thread killer([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // only the recorder's signalfd may take it
    // Once the program has run 300 ms of CPU more (recorded, unless attaching took that long).
    while (process_cpu_ms(prog.pid()) < cpu_before + 300) usleep(10000);
    kill(getpid(), SIGTERM);
  });
  recorder::Options o;
  o.pids = {prog.pid()};
  auto start = std::chrono::steady_clock::now();
  auto r = recorder::record(o);
  killer.join();
  const double cpu_used = process_cpu_ms(prog.pid()) - cpu_before;
  REQUIRE(r.ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  const model::Process& proc = r->profile.processes.at(0);
  CHECK_SAMPLES(count_samples(proc), recorded_cpu_ms(proc), 1000);
  CHECK(recorded_cpu_ms(proc) <= cpu_used + 5);
  CHECK(prog.alive());
}

TEST_CASE("recorder: a duration in launch mode ends the profile and the program keeps running",
          "[recorder]") {
  auto o = opts({test_program("rec_busy"), "spin", "5000"});
  o.duration_s = 1;
  auto start = std::chrono::steady_clock::now();
  auto r = recorder::record(o);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(r.ok());
  CHECK(took < std::chrono::seconds(5));
  CHECK(r->exit_status == 0);
  CHECK(r->stats.program_cpu_ms == -1);  // still running
  const model::Process& proc = r->profile.processes.at(0);
  auto pid = static_cast<pid_t>(proc.pid);
  // All its CPU time so far was recorded, but for what it ran since the recording stopped.
  CHECK_SAMPLES(count_samples(proc), recorded_cpu_ms(proc), 1000);
  CHECK(recorded_cpu_ms(proc) <= process_cpu_ms(pid) + 5);
  CHECK(kill(pid, 0) == 0);  // still running
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
}

TEST_CASE("recorder: SIGTERM sent to the profiler reaches the program and the profile is kept",
          "[recorder]") {
  CpuLog cpu;
  LogCpuInto env(cpu);
  std::thread killer([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    if (cpu.wait_for("ready")) kill(getpid(), SIGTERM);  // the program runs, recorded, 50 ms into its work
  });
  auto r = recorder::record(opts({test_program("rec_busy"), "spin", "10000"}));
  killer.join();
  REQUIRE(r.ok());
  CHECK(r->exit_status == 128 + SIGTERM);
  CHECK_SAMPLES(count_samples(r->profile.processes.at(0)), r->stats.program_cpu_ms, 1000);
}

TEST_CASE("recorder: 10 kHz on two busy threads works and losses become markers", "[recorder]") {
  for (auto cg : {recorder::CallGraph::FramePointer, recorder::CallGraph::Dwarf}) {
    auto o = opts({test_program("rec_busy"), "spin", "300", "2"}, cg);
    o.frequency_hz = 10000;
    CpuLog cpu;
    LogCpuInto env(cpu);
    auto r = recorder::record(o);
    REQUIRE(r.ok());
    const model::Profile& p = r->profile;
    const model::Process& proc = p.processes.at(0);
    // Every sample is in the profile or counted as lost (nearly all lost records are samples here).
    CHECK_SAMPLES(count_samples(proc) + r->stats.lost_records, cpu.ms("main") + cpu.ms("spinner-1"),
                  r->stats.frequency_hz);
    CHECK(p.meta.interval_ms == Approx(1000.0 / r->stats.frequency_hz));
    uint64_t marked = 0;
    for (const model::Thread& t : proc.threads)
      for (const model::Marker& m : t.markers) {
        // The summary's own markers (recorder/quality.h: "Data quality", "Stack walking") aside.
        if (p.strings.get(m.type) == "DataQuality" || p.strings.get(m.type) == "StackWalking") continue;
        CHECK(p.strings.get(m.type) == "LostRecords");
        REQUIRE(m.fields.size() == 1);
        marked += static_cast<uint64_t>(m.fields[0].number);
      }
    CHECK(marked == r->stats.lost_records);
    bool schema = false;
    for (const model::MarkerSchema& s : p.meta.marker_schemas) schema |= s.name == "LostRecords";
    CHECK(schema == (r->stats.lost_records > 0));
  }
}
