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

// Starts a program outside the recorder (for attach tests); kills and reaps it on destruction.
class Spawned {
 public:
  explicit Spawned(std::vector<std::string> argv) {
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
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
  // 300 ms busy at 1 kHz.
  CHECK(main.samples.size() >= 150);
  CHECK(main.samples.size() <= 600);
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
  int64_t cpu = 0;
  size_t known = 0;
  for (const model::Sample& s : main.samples)
    if (s.cpu_delta_ns >= 0) {
      cpu += s.cpu_delta_ns;
      ++known;
    }
  CHECK(known >= main.samples.size() - 1);
  CHECK(cpu >= static_cast<int64_t>(known) * 700'000);
  CHECK(cpu <= static_cast<int64_t>(known) * 1'300'000);
}

TEST_CASE("recorder: named threads keep their names and start and end times", "[recorder]") {
  auto r = recorder::record(opts({test_program("rec_busy"), "spin", "200", "3"}));
  REQUIRE(r.ok());
  const model::Process& proc = r->profile.processes.at(0);
  const model::Thread* t1 = find_thread(proc, "spinner-1");
  const model::Thread* t2 = find_thread(proc, "spinner-2");
  REQUIRE(t1);
  REQUIRE(t2);
  CHECK(!t1->is_main);
  CHECK(t1->tid != proc.pid);
  CHECK(t1->samples.size() >= 50);
  CHECK(t2->samples.size() >= 50);
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
  if (!r->stats.kernel_frames) {
    WARN("perf_event_paranoid allows user-space sampling only: no kernel frames to check");
    return;
  }
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
    auto r = recorder::record(opts({test_program("rec_busy"), c.mode, "100"}));
    REQUIRE(r.ok());
    CHECK(r->exit_status == c.status);
    // A crashing program still gives its samples.
    CHECK(count_samples(r->profile.processes.at(0)) >= 30);
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
  auto r = recorder::record(opts({test_program("rec_busy"), "spin", "300", "2"}, recorder::CallGraph::Dwarf));
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  const model::Process& proc = p.processes.at(0);
  Symbolizer sym;
  const model::Thread& main = proc.threads.at(0);
  REQUIRE(main.samples.size() >= 100);
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
  auto r = recorder::record(o);
  REQUIRE(r.ok());
  const model::Profile& p = r->profile;
  const model::Process& proc = p.processes.at(0);
  Symbolizer sym;
  const model::Thread& main = proc.threads.at(0);
  REQUIRE(main.samples.size() >= 100);
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
  CHECK(worker_hits >= 40);  // 100 ms of CPU
  // The plugin: a lib of the parent, and its samples symbolize into it.
  bool has_plugin = false;
  for (const model::Lib& l : parent.libs)
    has_plugin |= l.name == "librec_plugin.so" && l.breakpad_id.size() == 33;
  CHECK(has_plugin);
  size_t plugin_hits = 0;
  for (const model::Sample& s : parent.threads.at(0).samples)
    plugin_hits += contains(names_of(p, parent, s.stack, sym), "rec_plugin_work");
  CHECK(plugin_hits >= 70);  // 150 ms of CPU
  CHECK(r->stats.processes == p.processes.size());
}

TEST_CASE("recorder: an exec with samples on both sides starts a new process entry with the same pid",
          "[recorder][processes]") {
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
  CHECK(count_samples(before) >= 75);
  CHECK(count_samples(after) >= 75);
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
  Spawned prog({test_program("rec_busy"), "spin", "20000", "2"});
  REQUIRE(prog.pid() > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it start its thread
  recorder::Options o;
  o.pids = {prog.pid()};
  o.duration_s = 0.3;
  o.call_graph = recorder::CallGraph::FramePointer;
  auto r = recorder::record(o);
  REQUIRE(r.ok());
  CHECK(r->exit_status == 0);
  CHECK(prog.alive());
  const model::Process& proc = r->profile.processes.at(0);
  CHECK(proc.pid == static_cast<uint32_t>(prog.pid()));
  CHECK(proc.name == "rec_busy");
  CHECK(find_thread(proc, "spinner-1") != nullptr);
  CHECK(count_samples(proc) >= 30);  // two busy threads for 0.3 s: ~600 on an idle machine
  Symbolizer sym;
  size_t hits = 0;
  for (const model::Thread& t : proc.threads)
    for (const model::Sample& s : t.samples)
      hits += contains(names_of(r->profile, proc, s.stack, sym), "rec_busy_spin");
  CHECK(hits >= count_samples(proc) * 8 / 10);
}

TEST_CASE("recorder: attach follows the processes the program starts afterwards", "[recorder][attach]") {
  Spawned loop({"/bin/sh", "-c", "while true; do " + test_program("rec_busy") + " spin 30; done"});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  recorder::Options o;
  o.pids = {loop.pid()};
  o.duration_s = 0.5;
  auto r = recorder::record(o);
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
  Spawned a({test_program("rec_busy"), "spin", "20000"});
  Spawned b({test_program("rec_busy"), "spin", "20000"});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  recorder::Options o;
  o.pids = {a.pid(), b.pid()};
  o.duration_s = 0.3;
  auto r = recorder::record(o);
  REQUIRE(r.ok());
  std::set<uint32_t> pids;
  for (const model::Process& p : r->profile.processes)
    if (count_samples(p) >= 20) pids.insert(p.pid);  // ~300 each on an idle machine
  CHECK(pids.count(static_cast<uint32_t>(a.pid())));
  CHECK(pids.count(static_cast<uint32_t>(b.pid())));
  CHECK(a.alive());
  CHECK(b.alive());
}

TEST_CASE("recorder: in attach mode SIGTERM ends the recording and the profile is kept",
          "[recorder][attach]") {
  Spawned prog({test_program("rec_busy"), "spin", "20000"});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::thread killer([] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // only the recorder's signalfd may take it
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(getpid(), SIGTERM);
  });
  recorder::Options o;
  o.pids = {prog.pid()};
  auto start = std::chrono::steady_clock::now();
  auto r = recorder::record(o);
  killer.join();
  REQUIRE(r.ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(count_samples(r->profile.processes.at(0)) >= 30);  // ~300 on an idle machine
  CHECK(prog.alive());
}

TEST_CASE("recorder: a duration in launch mode ends the profile and the program keeps running",
          "[recorder]") {
  auto o = opts({test_program("rec_busy"), "spin", "5000"});
  o.duration_s = 0.3;
  auto start = std::chrono::steady_clock::now();
  auto r = recorder::record(o);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(r.ok());
  CHECK(took < std::chrono::seconds(3));
  CHECK(r->exit_status == 0);
  const model::Process& proc = r->profile.processes.at(0);
  CHECK(count_samples(proc) >= 50);  // 0.3 s of a busy program (fewer samples on a loaded machine)
  auto pid = static_cast<pid_t>(proc.pid);
  CHECK(kill(pid, 0) == 0);  // still running
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
}

TEST_CASE("recorder: SIGTERM sent to the profiler reaches the program and the profile is kept",
          "[recorder]") {
  std::thread killer([] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(getpid(), SIGTERM);
  });
  auto r = recorder::record(opts({test_program("rec_busy"), "spin", "10000"}));
  killer.join();
  REQUIRE(r.ok());
  CHECK(r->exit_status == 128 + SIGTERM);
  CHECK(count_samples(r->profile.processes.at(0)) >= 30);  // ~300 on an idle machine
}

TEST_CASE("recorder: 10 kHz on two busy threads works and losses become markers", "[recorder]") {
  for (auto cg : {recorder::CallGraph::FramePointer, recorder::CallGraph::Dwarf}) {
    auto o = opts({test_program("rec_busy"), "spin", "300", "2"}, cg);
    o.frequency_hz = 10000;
    auto r = recorder::record(o);
    REQUIRE(r.ok());
    const model::Profile& p = r->profile;
    const model::Process& proc = p.processes.at(0);
    CHECK(count_samples(proc) >= 300);
    CHECK(p.meta.interval_ms == Approx(1000.0 / r->stats.frequency_hz));
    uint64_t marked = 0;
    for (const model::Thread& t : proc.threads)
      for (const model::Marker& m : t.markers) {
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
