// Recorder tests: recorder::record() on real programs (tests/programs/recorder, the demo), asserting on the
// profile model: processes, threads and their names, sample counts, libs that symbolize, kernel frames, exit
// statuses. Each recording is a few hundred milliseconds.
#include "recorder/recorder.h"

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

#include "tests/recorder/recorder_fixtures.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::CpuLog;
using fxprof::test::process_cpu_ms;
using fxprof::test::test_program;

extern char** environ;

using namespace fxprof::test::recorder_fixtures;

TEST_CASE("recorder: a busy program gives samples on its main thread and libs that symbolize", "[recorder]") {
  CpuLog cpu;
  LogCpuInto env(cpu);
  auto r = recorder::record(opts({test_program("rec_busy"), "spin", "300"}));
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  CHECK(r->exit_status == 0);
  REQUIRE(p.processes.size() == 1);
  const model::Process& proc = p.processes[0];
  CHECK(proc.name == "rec_busy");
  CHECK(proc.pid > 0);
  REQUIRE(proc.threads.size() == 1);
  const model::Thread& main = proc.threads[0];
  CHECK(main.is_main);
  CHECK(main.tid == proc.pid);
  // 300 ms busy at 1 kHz; the program's CPU time as wait4 reports it agrees with what it logged.
  CHECK_SAMPLES(main.samples.size(), cpu.ms("main"), 1000);
  CHECK(r->stats.program_cpu_ms >= cpu.ms("main"));
  CHECK(r->stats.program_cpu_ms <= cpu.ms("main") + 50);
  CHECK(r->stats.samples == main.samples.size());
  CHECK(p.meta.interval_ms == Approx(1.0));
  CHECK(p.meta.start_monotonic_ns > 0);
  CHECK(p.meta.start_unix_ms > 1.6e12);
  CHECK(p.meta.product.find("rec_busy") != std::string::npos);
  CHECK(proc.end_ns.has_value());
  CHECK(main.end_ns.has_value());

  // The executable, libc and the vDSO are libs with build IDs.
  std::set<std::string> names;
  for (const model::Lib& l : proc.libs) {
    names.insert(l.name);
    CHECK(l.end > l.start);
    CHECK(l.arch == "x86_64");
    CHECK(l.debug_name == l.name);
    if (l.name != "[vdso]") CHECK(l.path.front() == '/');
    CHECK(l.breakpad_id.size() == 33);
    CHECK(!l.code_id.empty());
  }
  CHECK(names.count("rec_busy"));
  CHECK(names.count("libc.so.6"));
  CHECK(names.count("[vdso]"));

  // The leaf of (almost) every sample symbolizes to rec_busy_spin or what it calls (the clock): proves the
  // lib offsets, and that user samples are attributed to the right thread.
  Symbolizer sym;
  size_t in_spin = 0;
  for (const model::Sample& s : main.samples) {
    auto n = names_of(p, proc, s.stack, sym);
    if (contains(n, "rec_busy_spin")) ++in_spin;
  }
  CHECK(in_spin >= main.samples.size() * 8 / 10);

  // CPU deltas (context-switch accounting) add up to about one sampling interval of CPU time per sample of
  // the cpu-clock event, however loaded the machine is.
  int64_t cpu_ns = 0;
  size_t known = 0;
  for (const model::Sample& s : main.samples)
    if (s.cpu_delta_ns >= 0) {
      cpu_ns += s.cpu_delta_ns;
      ++known;
    }
  CHECK(known >= main.samples.size() - 1);
  CHECK(cpu_ns >= static_cast<int64_t>(known) * 700'000);
  CHECK(cpu_ns <= static_cast<int64_t>(known) * 1'300'000);
}

TEST_CASE("recorder: named threads keep their names and start and end times", "[recorder]") {
  CpuLog cpu;
  LogCpuInto env(cpu);
  auto r = recorder::record(opts({test_program("rec_busy"), "spin", "200", "3"}));
  REQUIRE(r.ok());
  const model::Process& proc = r->profile.processes.at(0);
  const model::Thread* t1 = find_thread(proc, "spinner-1");
  const model::Thread* t2 = find_thread(proc, "spinner-2");
  REQUIRE(t1);
  REQUIRE(t2);
  CHECK(!t1->is_main);
  CHECK(t1->tid != proc.pid);
  CHECK_SAMPLES(t1->samples.size(), cpu.ms("spinner-1"), 1000);
  CHECK_SAMPLES(t2->samples.size(), cpu.ms("spinner-2"), 1000);
  CHECK(t1->start_ns >= proc.start_ns);
  REQUIRE(t1->end_ns.has_value());
  CHECK(*t1->end_ns > t1->start_ns);
  size_t mains = 0;
  for (const model::Thread& t : proc.threads) mains += t.is_main;
  CHECK(mains == 1);
}

TEST_CASE("recorder: kernel frames sit on top of the user frames of a system-call-heavy function",
          "[recorder]") {
  // DWARF: the user part of a sample taken in a system call starts in libc's wrapper, which has no frame
  // pointer, so only CFI unwinding reaches rec_syscall_loop.
  auto r = recorder::record(opts({test_program("rec_busy"), "syscalls", "300"}, recorder::CallGraph::Dwarf));
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  const model::Process& proc = p.processes.at(0);
  INFO("the suite runs as root: kernel frames are always allowed");
  REQUIRE(r->stats.kernel_frames);
  size_t with_kernel = 0, named = 0, ordered = 0;
  Symbolizer sym;
  size_t under_loop = 0;
  for (const model::Sample& s : proc.threads.at(0).samples) {
    auto frames = frames_of(p, s.stack);  // leaf first
    if (frames.empty() || frames[0].kind != model::FrameKind::Kernel) continue;
    ++with_kernel;
    if (frames[0].name != model::kNoString && !p.strings.get(frames[0].name).empty()) ++named;
    // Leaf-most kernel frames, then user frames, never mixed.
    size_t i = 0;
    while (i < frames.size() && frames[i].kind == model::FrameKind::Kernel) ++i;
    bool rest_user = i < frames.size();
    for (; i < frames.size(); ++i) rest_user &= frames[i].kind != model::FrameKind::Kernel;
    ordered += rest_user;
    if (contains(names_of(p, proc, s.stack, sym), "rec_syscall_loop")) ++under_loop;
  }
  CHECK(with_kernel >= 20);
  CHECK(named == with_kernel);
  CHECK(ordered == with_kernel);
  CHECK(under_loop >= 1);
  for (const model::Frame& f : p.frames.all())
    if (f.kind == model::FrameKind::Kernel) CHECK(f.category == model::Category::Kernel);
}

TEST_CASE("recorder: a command that cannot run gives exit code 127 and the reason", "[recorder]") {
  auto r = recorder::record(opts({"/nonexistent/fxprof-no-such-program"}));
  REQUIRE(!r.ok());
  CHECK(r.exit_code() == 127);
  CHECK(r.error() == "cannot run '/nonexistent/fxprof-no-such-program': No such file or directory");
  auto r2 = recorder::record(opts({"/tmp"}));
  REQUIRE(!r2.ok());
  CHECK(r2.exit_code() == 127);
  CHECK(r2.error() == "cannot run '/tmp': Permission denied");
}

TEST_CASE("recorder: a seccomp filter refusing perf_event_open gives one error naming the cause and the fix",
          "[recorder]") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // What a container's default seccomp profile does: perf_event_open fails with EPERM.
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
      _exit(2);
    auto r = recorder::record(opts({"/bin/true"}));
    std::string msg = r.ok() ? "ok" : r.error();
    ssize_t n = write(fds[1], msg.data(), msg.size());
    _exit(n == static_cast<ssize_t>(msg.size()) ? 0 : 3);
  }
  close(fds[1]);
  std::string msg;
  char buf[1024];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st;
  waitpid(pid, &st, 0);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  INFO(msg);
  CHECK(msg.find("perf_event_open refused (Operation not permitted)") == 0);
  CHECK(msg.find("seccomp") != std::string::npos);
  CHECK(msg.find("--security-opt seccomp=unconfined") != std::string::npos);
  CHECK(msg.find("kernel.perf_event_paranoid=") != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("recorder: bad options are one-line errors", "[recorder]") {
  recorder::Options o;
  auto r = recorder::record(o);
  REQUIRE(!r.ok());
  CHECK(r.error().find("nothing to record") != std::string::npos);
  o.command = {"/bin/true"};
  o.frequency_hz = 0;
  CHECK(!recorder::record(o).ok());
  recorder::Options a;
  a.pids = {999999999};
  auto ra = recorder::record(a);
  REQUIRE(!ra.ok());
  CHECK(ra.error() == "no process with pid 999999999");
}

TEST_CASE("recorder: the exit status of the program is kept and crashes too", "[recorder]") {
  struct Case {
    const char* mode;
    int status;
  };
  for (Case c : {Case{"spin", 0}, Case{"exit3", 3}, Case{"segv", 128 + SIGSEGV}, Case{"abort", 128 + SIGABRT},
                 Case{"sigkill", 128 + SIGKILL}}) {
    INFO(c.mode);
    CpuLog cpu;
    LogCpuInto env(cpu);
    // 300 ms of CPU: +-25% of 100 samples was too tight on a loaded machine.
    auto r = recorder::record(opts({test_program("rec_busy"), c.mode, "300"}));
    REQUIRE(r.ok());
    CHECK(r->exit_status == c.status);
    // A crashing program still gives its samples.
    CHECK_SAMPLES(count_samples(r->profile.processes.at(0)), cpu.ms("main"), 1000);
  }
}

TEST_CASE("recorder: the demo program shows its threads", "[recorder]") {
  auto o = opts({test::demo_bin(), "0.3"});
  auto r = recorder::record(o);
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  const model::Process& proc = r->profile.processes.at(0);
  for (const char* name : {"demo-primes", "demo-walker", "demo-sleeper", "demo-io"}) {
    INFO(name);
    CHECK(find_thread(proc, name) != nullptr);
  }
  Symbolizer sym;
  const model::Thread* primes = find_thread(proc, "demo-primes");
  REQUIRE(primes);
  size_t hits = 0;
  for (const model::Sample& s : primes->samples)
    hits += contains(names_of(r->profile, proc, s.stack, sym), "demo_compute_primes");
  CHECK(hits >= primes->samples.size() / 2);
}

TEST_CASE("recorder: DWARF call graphs reach main through code without frame pointers", "[recorder][dwarf]") {
  CpuLog cpu;
  LogCpuInto env(cpu);
  auto r = recorder::record(opts({test_program("rec_busy"), "spin", "300", "2"}, recorder::CallGraph::Dwarf));
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  const model::Process& proc = p.processes.at(0);
  Symbolizer sym;
  const model::Thread& main = proc.threads.at(0);
  CHECK_SAMPLES(main.samples.size(), cpu.ms("main"), 1000);
  size_t rooted = 0, truncated = 0;
  for (const model::Sample& s : main.samples) {
    auto n = names_of(p, proc, s.stack, sym);
    if (contains(n, "main") && contains(n, "rec_busy_spin")) ++rooted;
    if (contains(n, "(stack truncated)")) ++truncated;
  }
  CHECK(rooted >= main.samples.size() * 9 / 10);
  CHECK(truncated <= main.samples.size() / 10);
  // The worker thread's stacks go through libstdc++ (std::thread) down to libc's thread start (start_thread,
  // clone3: local symbols our small test symbolizer cannot name, so check the libs).
  const model::Thread* spinner = find_thread(proc, "spinner-1");
  REQUIRE(spinner);
  size_t started = 0;
  for (const model::Sample& s : spinner->samples) {
    auto n = names_of(p, proc, s.stack, sym);
    std::vector<std::string> libs;
    for (const model::Frame& f : frames_of(p, s.stack))
      if (f.kind == model::FrameKind::Native) libs.push_back(lib_of(proc, f.address));
    if (contains(n, "rec_busy_spin") && contains(libs, "libstdc++.so.6") && !libs.empty() &&
        libs.back() == "libc.so.6")
      ++started;
  }
  CHECK(started >= spinner->samples.size() * 8 / 10);
}

TEST_CASE("recorder: a DWARF stack deeper than the copy gets a stack-truncated root and not a wrong one",
          "[recorder][dwarf]") {
  auto o = opts({test_program("rec_busy"), "deep", "200"}, recorder::CallGraph::Dwarf);
  o.stack_size = 8192;
  CpuLog cpu;
  LogCpuInto env(cpu);
  auto r = recorder::record(o);
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  const model::Process& proc = p.processes.at(0);
  Symbolizer sym;
  const model::Thread& main = proc.threads.at(0);
  CHECK_SAMPLES(main.samples.size(), cpu.ms("main"), 1000);
  size_t labelled = 0;
  for (const model::Sample& s : main.samples) {
    auto frames = frames_of(p, s.stack);
    auto n = names_of(p, proc, s.stack, sym);
    if (!frames.empty() && frames.back().kind == model::FrameKind::Label &&
        p.strings.get(frames.back().name) == "(stack truncated)" && contains(n, "rec_busy_spin") &&
        contains(n, "rec_deep_recurse") && !contains(n, "main"))
      ++labelled;
  }
  CHECK(labelled >= main.samples.size() * 9 / 10);
}

TEST_CASE("recorder: every child process has its own libs and dlopened code is a lib",
          "[recorder][processes]") {
  std::string plugin = test_program("librec_plugin.so");
  CpuLog cpu;
  LogCpuInto env(cpu);
  auto r = recorder::record(opts({test_program("rec_forkexec"), plugin, "50"}));
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  const model::Profile& p = r->profile;
  const model::Process& parent = p.processes.at(0);
  CHECK(parent.name == "rec_forkexec");
  std::set<uint32_t> true_pids;
  for (const model::Process& proc : p.processes) {
    if (proc.name != "true") continue;
    true_pids.insert(proc.pid);
    std::set<std::string> libs;
    for (const model::Lib& l : proc.libs) libs.insert(l.name);
    CHECK(libs.count("true"));
    CHECK(!libs.count("rec_forkexec"));  // exec replaced the image
    REQUIRE(!proc.threads.empty());
    CHECK(proc.threads[0].is_main);
    CHECK(proc.end_ns.has_value());
  }
  CHECK(true_pids.size() == 50);
  // The fork child without exec: same name, the parent's libs, its own samples.
  const model::Process* worker = nullptr;
  for (const model::Process& proc : p.processes)
    if (proc.name == "rec_forkexec" && proc.pid != parent.pid) worker = &proc;
  REQUIRE(worker);
  Symbolizer sym;
  size_t worker_hits = 0;
  for (const model::Thread& t : worker->threads)
    for (const model::Sample& s : t.samples)
      worker_hits += contains(names_of(p, *worker, s.stack, sym), "rec_fork_child_work");
  CHECK_SAMPLES(count_samples(*worker), cpu.ms("worker"), 1000);  // 100 ms of CPU
  CHECK(worker_hits >= count_samples(*worker) * 8 / 10);
  // The plugin: a lib of the parent, and its samples symbolize into it.
  bool has_plugin = false;
  for (const model::Lib& l : parent.libs)
    has_plugin |= l.name == "librec_plugin.so" && l.breakpad_id.size() == 33;
  CHECK(has_plugin);
  size_t plugin_hits = 0;
  for (const model::Sample& s : parent.threads.at(0).samples)
    plugin_hits += contains(names_of(p, parent, s.stack, sym), "rec_plugin_work");
  CHECK_SAMPLES(plugin_hits, 150.0, 1000);  // the plugin spins 150 ms of its thread's CPU time
  CHECK(r->stats.processes == p.processes.size());
}

TEST_CASE("recorder: an exec with samples on both sides starts a new process entry with the same pid",
          "[recorder][processes]") {
  CpuLog cpu;
  LogCpuInto env(cpu);
  auto r = recorder::record(opts({test_program("rec_busy"), "exec", "150"}));
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  const model::Profile& p = r->profile;
  REQUIRE(p.processes.size() == 2);
  const model::Process& before = p.processes[0];
  const model::Process& after = p.processes[1];
  CHECK(before.pid == after.pid);
  REQUIRE(before.end_ns.has_value());
  CHECK(*before.end_ns <= after.start_ns);
  CHECK_SAMPLES(count_samples(before), cpu.ms("before-exec"), 1000);
  // The thread's CPU clock goes on across the exec.
  CHECK_SAMPLES(count_samples(after), cpu.ms("main") - cpu.ms("before-exec"), 1000);
  for (const model::Sample& s : before.threads.at(0).samples) CHECK(s.time_ns <= *before.end_ns);
  for (const model::Sample& s : after.threads.at(0).samples) CHECK(s.time_ns >= after.start_ns);
  // Each image has its own mapping of rec_busy.
  Symbolizer sym;
  size_t hits = 0;
  for (const model::Sample& s : after.threads.at(0).samples)
    hits += contains(names_of(p, after, s.stack, sym), "rec_busy_spin");
  CHECK(hits >= count_samples(after) * 8 / 10);
  CHECK(after.threads.at(0).is_main);
}

TEST_CASE("recorder: 2000 short threads are all recorded with their names", "[recorder][threads]") {
  auto r = recorder::record(opts({test_program("rec_threads"), "2000"}));
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  const model::Process& proc = r->profile.processes.at(0);
  CHECK(proc.threads.size() >= 2001);
  CHECK(proc.threads.size() <= 2100);
  size_t named = 0, ended = 0;
  for (const model::Thread& t : proc.threads) {
    if (t.is_main) continue;
    named += t.name.size() > 1 && t.name[0] == 'w' && std::isdigit(static_cast<unsigned char>(t.name[1]));
    ended += t.end_ns.has_value() && *t.end_ns >= t.start_ns;
  }
  CHECK(named >= 1990);
  CHECK(ended >= 1990);
}

// issue 36: the caller loads a binary's symbols while the program runs once a sample's stack goes through
// it (Options::on_binary_sampled), not when it is mapped: a library loaded and never run is not told.
TEST_CASE("recorder: a binary is told when a sample first goes through it, not when it is mapped",
          "[recorder]") {
  const std::string plugin = test_program("librec_plugin.so");
  recorder::Options o =
      opts({"/usr/bin/env", "LD_PRELOAD=" + plugin, test_program("rec_busy"), "spin", "200"},
           recorder::CallGraph::Dwarf);
  std::vector<std::string> told;
  o.on_binary_sampled = [&told](const model::Lib& l) { told.push_back(l.name); };
  auto r = recorder::record(o);
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  const model::Profile& p = r->profile;
  std::set<std::string> used;  // the binaries the samples' frames are in
  bool plugin_mapped = false;
  for (const model::Process& proc : p.processes) {
    for (const model::Lib& l : proc.libs) plugin_mapped |= l.name == "librec_plugin.so";
    for (const model::Thread& t : proc.threads)
      for (const model::Sample& s : t.samples)
        for (const model::Frame& f : frames_of(p, s.stack))
          if (f.kind == model::FrameKind::Native)
            if (std::string lib = lib_of(proc, f.address); !lib.empty()) used.insert(lib);
  }
  std::string said;
  for (const std::string& n : told) said += n + ' ';
  INFO("told: " << said);
  CHECK(plugin_mapped);                                          // a lib of the profile all the same
  CHECK(std::count(told.begin(), told.end(), "rec_busy") == 1);  // sampled: told once
  for (const std::string& n : told) CHECK(used.count(n) == 1);   // only binaries samples go through
  // (Its constructors' few microseconds may take a sample, rarely: then it is told, as it should be.)
  if (!used.count("librec_plugin.so"))
    CHECK(std::find(told.begin(), told.end(), "librec_plugin.so") == told.end());
}
