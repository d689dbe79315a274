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

#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::CpuLog;
using fxprof::test::process_cpu_ms;
using fxprof::test::test_program;

extern char** environ;

namespace {

// ---- A tiny ELF symbol table reader: maps a lib-relative address to a function name (tests only). ----
struct Symbols {
  struct Sym {
    uint64_t start, size;
    std::string name;
  };
  std::vector<Sym> syms;
  uint64_t base_svma = 0;

  explicit Symbols(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    fstat(fd, &st);
    auto size = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return;
    auto* b = static_cast<const char*>(p);
    auto* eh = reinterpret_cast<const Elf64_Ehdr*>(b);
    auto* ph = reinterpret_cast<const Elf64_Phdr*>(b + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; ++i)
      if (ph[i].p_type == PT_LOAD) {
        base_svma = ph[i].p_vaddr;
        break;
      }
    auto* sh = reinterpret_cast<const Elf64_Shdr*>(b + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
      auto* s = reinterpret_cast<const Elf64_Sym*>(b + sh[i].sh_offset);
      const char* strtab = b + sh[sh[i].sh_link].sh_offset;
      for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k)
        if (ELF64_ST_TYPE(s[k].st_info) == STT_FUNC && s[k].st_value)
          syms.push_back({s[k].st_value, s[k].st_size, strtab + s[k].st_name});
    }
    munmap(p, size);
  }
  std::string lookup(uint64_t svma) const {
    for (const Sym& s : syms)
      if (svma >= s.start && svma < s.start + std::max<uint64_t>(s.size, 1)) return s.name;
    return "";
  }
};

class Symbolizer {
 public:
  // Function name of `address` in `proc` ("" if unknown); return addresses are looked up at address - 1.
  std::string name(const model::Process& proc, uint64_t address, bool is_return_address) {
    uint64_t a = is_return_address ? address - 1 : address;
    for (const model::Lib& l : proc.libs) {
      if (a < l.start || a >= l.end) continue;
      auto it = cache_.find(l.path);
      if (it == cache_.end()) it = cache_.emplace(l.path, std::make_unique<Symbols>(l.path)).first;
      uint64_t rel = a - (l.start - l.offset);
      return it->second->lookup(rel + it->second->base_svma);
    }
    return "";
  }

 private:
  std::map<std::string, std::unique_ptr<Symbols>> cache_;
};

// The frames of a stack, leaf first.
std::vector<model::Frame> frames_of(const model::Profile& p, model::StackId s) {
  std::vector<model::Frame> out;
  for (; s != model::kNoStack; s = p.stacks.prefix(s)) out.push_back(p.frames.get(p.stacks.frame(s)));
  return out;
}

// Names of the native frames of a stack, leaf first.
std::vector<std::string> names_of(const model::Profile& p, const model::Process& proc, model::StackId s,
                                  Symbolizer& sym) {
  std::vector<std::string> out;
  bool leaf = true;
  for (const model::Frame& f : frames_of(p, s)) {
    if (f.kind == model::FrameKind::Native) {
      out.push_back(sym.name(proc, f.address, !leaf));
      leaf = false;
    } else if (f.kind == model::FrameKind::Label) {
      out.push_back(std::string(p.strings.get(f.name)));
    }
  }
  return out;
}

std::string lib_of(const model::Process& proc, uint64_t address) {
  for (const model::Lib& l : proc.libs)
    if (address >= l.start && address < l.end) return l.name;
  return "";
}

// Whether a frame name is `s` or, for the mangled names of functions in anonymous namespaces, holds it.
bool contains(const std::vector<std::string>& v, const std::string& s) {
  for (const std::string& n : v)
    if (n == s || (s.size() > 6 && n.find(s) != std::string::npos)) return true;
  return false;
}

recorder::Options opts(std::vector<std::string> cmd,
                       recorder::CallGraph cg = recorder::CallGraph::FramePointer) {
  recorder::Options o;
  o.command = std::move(cmd);
  o.call_graph = cg;
  return o;
}

const model::Thread* find_thread(const model::Process& p, const std::string& name) {
  for (const model::Thread& t : p.threads)
    if (t.name == name) return &t;
  return nullptr;
}

size_t count_samples(const model::Process& p) {
  size_t n = 0;
  for (const model::Thread& t : p.threads) n += t.samples.size();
  return n;
}

// The CPU time the kernel's context-switch records give a process while it was recorded (the samples' CPU
// deltas, which keep adding up across lost samples). Attach and --duration recordings have no other exact
// window: /proc's CPU time read around record() also counts what ran while fxprof attached and finished.
double recorded_cpu_ms(const model::Process& p) {
  double ns = 0;
  for (const model::Thread& t : p.threads)
    for (const model::Sample& s : t.samples)
      if (s.cpu_delta_ns > 0) ns += static_cast<double>(s.cpu_delta_ns);
  return ns / 1e6;
}

// The programs the recorder launches inherit our environment: while alive, they log their CPU time into
// `log` (tests/programs/cpu_log.h).
class LogCpuInto {
 public:
  explicit LogCpuInto(const CpuLog& log) { setenv(CpuLog::kVariable, log.path().c_str(), 1); }
  ~LogCpuInto() { unsetenv(CpuLog::kVariable); }
  LogCpuInto(const LogCpuInto&) = delete;
  LogCpuInto& operator=(const LogCpuInto&) = delete;
};

// Starts a program outside the recorder (for attach tests), logging into `log`; kills and reaps it on
// destruction.
class Spawned {
 public:
  Spawned(std::vector<std::string> argv, const CpuLog& log) {
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    LogCpuInto env(log);
    if (posix_spawn(&pid_, a[0], nullptr, nullptr, a.data(), environ) != 0) pid_ = -1;
  }
  ~Spawned() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // Running (not exited, not a zombie).
  bool alive() const {
    siginfo_t si{};
    return pid_ > 0 && waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == 0;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace

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
