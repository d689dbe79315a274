#include "recorder/recorder.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "base/fd.h"
#include "base/path.h"
#include "recorder/builder.h"
#include "recorder/capture.h"
#include "recorder/host.h"
#include "recorder/launcher.h"
#include "recorder/machine.h"
#include "recorder/perf.h"
#include "recorder/quality.h"
#include "recorder/proc_counters.h"
#include "recorder/rss.h"
#include "recorder/unwind/report.h"
#include "recorder/unwind/unwinder.h"
#include "recorder/waker.h"

namespace fxprof::recorder {

namespace {

constexpr int kPollMs = 25;  // upper bound on how late we notice anything the kernel does not wake us for

uint64_t now_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

long read_sysctl(const char* path, long fallback) {
  auto s = live_procfs().read(path);
  if (!s) return fallback;
  char* end = nullptr;
  long v = std::strtol(s->c_str(), &end, 10);
  return end == s->c_str() ? fallback : v;
}

std::string paranoid_meaning(long level) {
  if (level <= -1) return "no restrictions";
  if (level == 0)
    return "ordinary users may sample their own processes, user and kernel space, and CPU-wide events";
  if (level == 1) return "ordinary users may sample their own processes, user and kernel space";
  if (level == 2) return "ordinary users may sample only the user space of their own processes";
  return "ordinary users may not use perf events at all";
}

// Attaching to someone else's process needs ptrace rights over it, whatever perf_event_paranoid says.
bool another_users(int pid) {
  struct stat st;
  return stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 && st.st_uid != geteuid();
}
Error attach_refused(int pid, int err) {
  if (another_users(pid))
    return Err("cannot attach to pid " + std::to_string(pid) + ": it belongs to another user (" +
               errno_text(err) + "); run fxprof as that user or as root");
  return Err("cannot attach to pid " + std::to_string(pid) + ": " + errno_text(err));
}

// The one error for a refused perf_event_open, naming the setting and the fix. `paranoid` is the sysctl's
// value; `root`: it does not apply to us.
Error permission_error(int err, long paranoid, bool root, bool tried_user_only) {
  std::string msg = "perf_event_open refused (" + errno_text(err) + "): ";
  const std::string setting = "kernel.perf_event_paranoid=" + std::to_string(paranoid);
  const std::string seccomp_fix =
      "a seccomp filter or security module blocks perf_event_open. Fix: in a container run it with "
      "--security-opt seccomp=unconfined --cap-add PERFMON (or --privileged)";
  if (err == ENOSYS) {
    msg += "this kernel has no perf events, or " + seccomp_fix;
  } else if (root) {
    msg += "fxprof runs as root, so " + setting + " does not apply: " + seccomp_fix;
  } else if (paranoid >= 3) {
    msg +=
        setting + " (" + paranoid_meaning(paranoid) +
        "). Fix: `sudo sysctl kernel.perf_event_paranoid=2` (user-space sampling of your own programs) or 1 "
        "(with kernel stacks), or run fxprof as root";
  } else if (tried_user_only || paranoid <= 1) {
    msg += setting + " allows it (" + paranoid_meaning(paranoid) + "), so " + seccomp_fix +
           "; or run fxprof as root";
  } else {
    msg += setting + " (" + paranoid_meaning(paranoid) +
           "). Fix: `sudo sysctl kernel.perf_event_paranoid=1`, or run fxprof as root";
  }
  return Err(msg);
}

int pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::vector<uint32_t> list_tasks(uint32_t pid) {
  return live_procfs().list("/proc/" + std::to_string(pid) + "/task");
}

// User plus system CPU time of a rusage, in milliseconds.
double cpu_ms(const rusage& ru) {
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

size_t floor_pow2(size_t v) {
  size_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
size_t ceil_pow2(size_t v) {
  size_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Blocks SIGINT/SIGTERM/SIGHUP for the recording and reads them from a signalfd; restores the caller's mask
// after consuming what arrived, so a Ctrl-C during recording never kills the caller before it writes the
// profile.
class SignalGuard {
 public:
  SignalGuard() {
    const sigset_t set = recording_signals();
    pthread_sigmask(SIG_BLOCK, &set, &old_);
    fd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  }
  ~SignalGuard() {
    drain();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  const sigset_t& old_mask() const { return old_; }
  int fd() const { return fd_.get(); }
  // Reads one pending signal; false when none.
  bool next(signalfd_siginfo& si) {
    return fd_.valid() && read(fd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si);
  }
  void drain() {
    signalfd_siginfo si;
    while (next(si)) {
    }
  }

 private:
  sigset_t old_;
  UniqueFd fd_;
};

// One recording. run() reads as the list of its passes, each a member function below it; the state they
// hand on to each other is the members.
class Session {
 public:
  explicit Session(const Options& o) : opt_(o), launch_(!o.command.empty()) {}
  Result<Recording> run();

 private:
  Status pass(const char* name, Status (Session::*step)());
  Status plan_buffers();
  Status prepare_builder();
  Status start_launch();
  Status start_attach();
  Status read_until_stop();
  void reap(int pid);
  Status drain();
  Status finish_profile();
  Status summarize();
  void verbose_summary();

  Status choose_config(int pid);
  void choose_off_cpu(int pid);
  Status open_target(int pid, bool required);
  Status attach_thread(int tid);
  size_t read_round();
  void sync_waker();
  void notice(const std::string& s) { std::fprintf(stderr, "fxprof: %s\n", s.c_str()); }

  // DWARF mode: the walk's counts go into the profile's meta, and one line names where stacks stopped
  // short when more than 5 % of a thread's did (recorder/unwind/report.h).
  void report_stack_walk(model::Profile& prof) {
    const UnwindStats& u = unwinder_->stats();
    prof.meta.stack_walk =
        model::Meta::StackWalk{u.stacks, u.truncated, u.failed, u.fp_stacks, u.scanned_stacks};
    std::vector<bool> marker(prof.frames.size()), off_leaf(prof.frames.size());
    for (size_t f = 0; f < prof.frames.size(); ++f) {
      const model::Frame& fr = prof.frames.get(static_cast<model::FrameId>(f));
      marker[f] = fr.kind == model::FrameKind::Label && prof.strings.get(fr.name) == "(stack truncated)";
      // The reason leaf of off-CPU samples ([blocked: ...], [preempted]).
      off_leaf[f] = fr.kind == model::FrameKind::Label && fr.category == model::Category::Idle;
    }
    std::vector<uint8_t> incomplete(prof.stacks.size());  // the builder puts the marker at the root
    for (size_t s = 0; s < prof.stacks.size(); ++s) {
      const auto id = static_cast<model::StackId>(s);
      const model::StackId prefix = prof.stacks.prefix(id);
      incomplete[s] = prefix == model::kNoStack ? marker[prof.stacks.frame(id)] : incomplete[prefix];
    }
    // On-CPU samples per thread for the line about --stack-size; off-CPU ones (their own, smaller copy:
    // --off-cpu-stack-size) counted apart.
    std::vector<ThreadStacks> threads;
    uint64_t off_samples = 0, off_incomplete = 0;
    for (const model::Process& p : prof.processes) {
      for (const model::Thread& t : p.threads) {
        ThreadStacks ts{t.name, t.tid, 0, 0};
        for (const model::Sample& smp : t.samples) {
          const bool known = smp.stack != model::kNoStack && smp.stack < incomplete.size();
          const bool cut = known && incomplete[smp.stack];
          if (known && off_leaf[prof.stacks.frame(smp.stack)]) {
            ++off_samples;
            off_incomplete += cut;
          } else {
            ++ts.samples;
            ts.incomplete += cut;
          }
        }
        threads.push_back(std::move(ts));
      }
    }
    std::string line = incomplete_stacks_warning(threads, unwinder_->stops(), cfg_.stack_size);
    if (!line.empty()) notice(line);
    if (off_samples >= 20 && off_incomplete * 20 > off_samples)
      notice(std::to_string(off_incomplete * 100 / off_samples) +
             "% of the off-CPU stacks are incomplete; if the " + std::to_string(cfg_.switch_stack_size) +
             "-byte stack copy cut them, raise --off-cpu-stack-size (at most 65528; each context switch "
             "copies it)");
  }

  // Every data-quality line and meta entry, through the one mechanism (recorder/quality.h).
  void report_data_quality(model::Profile& prof) {
    std::vector<QualityProblem> problems;
    if (child_ && !opt_.command.empty()) {
      const std::string path = command_path(opt_.command[0]);
      if (std::string why = unprofilable_reason(path); !why.empty())
        builder_->launch_not_followed(static_cast<uint32_t>(child_->pid()), path, why);
    }
    for (UnfollowedExec& u : builder_->unfollowed()) name_unfollowed(*procfs_, u);
    if (!builder_->unfollowed().empty()) {
      problems.push_back(unfollowed_problem(builder_->unfollowed()));
      rec_.stats.not_followed = problems.back().line;
    }
    for (const std::string& refused : builder_->jit_refused())
      problems.push_back({"JIT names not used (file not the process's): " + refused, 1,
                          refused + ": its JIT function names were not used (a perf map or jitdump must belong "
                                    "to the process's user or root and be writable by no one else)"});
    if (unwinder_)  // named in the incomplete-stacks line already: meta entries only
      for (const UnwindStop& s : unwinder_->stops())
        if (s.corrupt > 0)
          problems.push_back({"Stacks stopped at a damaged .eh_frame: " + s.path, s.corrupt, ""});
    for (const std::string& path : builder_->deleted_read())
      problems.push_back({"Deleted while running, read from the open file: " + path, 1, ""});
    if (!builder_->deleted_unreadable().empty()) {
      std::string names;
      for (const std::string& path : builder_->deleted_unreadable())
        names += (names.empty() ? "" : ", ") + path;
      problems.push_back(
          {"Deleted while running, not readable: " + names, builder_->deleted_unreadable().size(),
           names + " deleted or replaced while running and not readable through /proc/PID/map_files (needs "
                   "root): its stacks may be incomplete and its functions unnamed. Keep the binary until the "
                   "recording ends, or record as root"});
    }
    if (const uint64_t lost = waker_ ? waker_->dropped() : 0; lost > 0)
      problems.push_back({"Wakeups lost (eBPF ring buffer full)", lost,
                          std::to_string(lost) +
                              " wakeups lost: the eBPF waker tracer's ring buffer was full (the reader fell "
                              "behind), so some waits have no \"Woken by\" and no Wakeup marker"});
    if (rec_.stats.lost_records) {
      problems.push_back(lost_records_problem(rec_.stats.lost_records, builder_->unknown_code_samples(),
                                              builder_->unknown_code_processes()));
      if (builder_->unknown_code_samples() > 0)
        problems.push_back({"Samples in code whose mapping was lost", builder_->unknown_code_samples(), ""});
    }
    report_quality(prof, problems);
  }

  const Options& opt_;
  const bool launch_;  // a command to run (else -p PIDs)
  uint64_t freq_ = 0;  // the sampling rate used (the kernel's limit may lower the one asked for)
  EventConfig cfg_;
  long paranoid_ = 2;  // kernel.perf_event_paranoid
  bool root_ = false;  // not limited by it
  std::vector<int> cpus_;
  size_t data_pages_ = 128, min_pages_ = 8;
  size_t switch_pages_ = 128;  // off-CPU stacks: data pages of each context-switches buffer
  std::vector<UniqueFd> fds_;
  RingSet rings_;                // one per CPU: every other event of that CPU writes into it (SET_OUTPUT)
  std::vector<int> buf_of_cpu_;  // index into rings_, -1 = none yet
  // Off-CPU stacks: the context-switches events write into a second buffer per CPU, so that their samples
  // are known by where they come from (the same sample layout, another register mask). It comes after the
  // CPU's first buffer in rings_: a switch record read there had its sample written (before it) already.
  bool switch_stacks_ = false;
  std::vector<int> switch_buf_of_cpu_;
  // The boundary (recorder/host.h): the builder reads records from source_ and /proc through procfs_, the
  // ring buffers and the live /proc, or their taps when Options::capture_path asks for a capture.
  RecordSource* source_ = &rings_;
  Procfs* procfs_ = &live_procfs();
  std::unique_ptr<CaptureWriter> capture_;
  std::vector<RecordRef> refs_;  // reused per round
  std::unique_ptr<Unwinder> unwinder_;
  std::unique_ptr<ProfileBuilder> builder_;
  std::unique_ptr<WakerTracer> waker_;  // off-CPU: who woke each wait (optional, eBPF)
  std::vector<Waking> wakings_;         // reused per round
  std::set<int> attached_tids_;
  // Launch and attach: the processes given, and their pidfds (invalid when pidfd_open is missing).
  std::optional<SignalGuard> signals_;
  std::optional<SuspendedChild> child_;
  std::vector<int> pids_;
  std::vector<UniqueFd> pidfds_;
  bool child_exited_ = false;
  std::optional<RssSampler> rss_;
  std::optional<ProcCounters> counters_;  // faults, switches, run delay per process (proc_counters.h)
  uint64_t start_ns_ = 0, exit_seen_ns_ = 0;
  struct Phase {
    const char* name;
    double ms;
  };
  std::vector<Phase> phases_;
  Recording rec_;
};

Status Session::choose_config(int pid) {
  // Probe on the first CPU: hardware cycles if there is a PMU, kernel frames if permitted.
  bool tried_user_only = false;
  for (int attempt = 0; attempt < 6; ++attempt) {
    int err = 0;
    UniqueFd fd = perf_event_open(make_attr(cfg_), pid, cpus_[0], -1, err);
    if (fd.valid()) return {};
    if (opt_.event && opt_.event->source == counters::Source::Hardware && counters::unsupported_errno(err))
      return Err("cannot sample on " + opt_.event->name + ": " +
                 (counters::have_pmu() ? "this machine's PMU does not count it"
                                       : counters::no_pmu_message("record")));
    if (opt_.event && counters::unsupported_errno(err))
      return Err("cannot sample on " + opt_.event->name + ": perf_event_open: " + errno_text(err));
    if (cfg_.hardware && (err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == EINVAL)) {
      cfg_.hardware = false;
      if (opt_.verbose)
        notice("no hardware PMU here (a virtual machine?): sampling with the cpu-clock software event");
      continue;
    }
    if ((err == EACCES || err == EPERM) && opt_.command.empty() && another_users(pid))
      return attach_refused(pid, err);
    if ((err == EACCES || err == EPERM) && !cfg_.exclude_kernel && !root_ && paranoid_ == 2) {
      cfg_.exclude_kernel = true;
      tried_user_only = true;
      notice(
          "kernel.perf_event_paranoid=2 lets ordinary users sample only the user space of their own "
          "processes: recording without kernel frames (for kernel stacks: `sudo sysctl "
          "kernel.perf_event_paranoid=1` or run as root)");
      continue;
    }
    if (err == EACCES || err == EPERM || err == ENOSYS)
      return permission_error(err, paranoid_, root_, tried_user_only);
    if (err == ESRCH) return Err("no process with pid " + std::to_string(pid));
    return Err("perf_event_open failed: " + errno_text(err));
  }
  return Err("perf_event_open failed");
}

// Off-CPU stacks need the context-switches event with kernel callchains: root, or perf_event_paranoid <= 1.
// Without them the switch records (on the CPU event) still time every blocked span: markers, no stacks.
void Session::choose_off_cpu(int pid) {
  cfg_.switch_regs_mask = (cfg_.dwarf ? cfg_.regs_mask : 0) | kPerfRegDiBit;
  int err = 0;
  UniqueFd fd = perf_event_open(make_switch_attr(cfg_), pid, cpus_[0], -1, err);
  switch_stacks_ = fd.valid();
  if (switch_stacks_) return;
  if (err == EACCES || err == EPERM)
    notice(
        "off-CPU stacks need `sudo sysctl kernel.perf_event_paranoid=1` or root: blocked time is shown as "
        "markers without stacks");
  else
    notice("off-CPU stacks are not available (context-switches event: " + errno_text(err) +
           "): blocked time is shown as markers without stacks");
}

// Opens one event per CPU on `pid` (inherit: its future threads and children follow).
Status Session::open_target(int pid, bool required) {
  perf_event_attr attr = make_attr(cfg_);
  bool any = false;
  for (size_t i = 0; i < cpus_.size(); ++i) {
    int err = 0;
    UniqueFd fd = perf_event_open(attr, pid, cpus_[i], -1, err);
    if (!fd.valid()) {
      if (err == ENODEV) continue;  // offline CPU
      if (err == ESRCH && !required) return {};
      if (err == EMFILE || err == ENFILE) return Err("too many open files: raise `ulimit -n`");
      // -p OWN,OTHER: the probe passed on the first process; name the one refused.
      if ((err == EACCES || err == EPERM) && !launch_) return attach_refused(pid, err);
      return Err("perf_event_open failed on CPU " + std::to_string(cpus_[i]) + ": " + errno_text(err));
    }
    if (buf_of_cpu_[i] < 0) {
      auto rb = RingBuffer::map(fd.get(), data_pages_, min_pages_);
      if (!rb) return std::move(rb).take_error();
      buf_of_cpu_[i] = static_cast<int>(rings_.size());
      rings_.add(std::move(*rb), false);
    } else if (ioctl(fd.get(), PERF_EVENT_IOC_SET_OUTPUT, rings_[static_cast<size_t>(buf_of_cpu_[i])].fd()) !=
               0) {
      return Err("cannot share a perf ring buffer: " + errno_text(errno));
    }
    fds_.push_back(std::move(fd));
    any = true;
    if (switch_stacks_) {
      UniqueFd sw = perf_event_open(make_switch_attr(cfg_), pid, cpus_[i], -1, err);
      if (!sw.valid()) {
        if (err == ESRCH && !required) return {};
        return Err("perf_event_open (context switches) failed on CPU " + std::to_string(cpus_[i]) + ": " +
                   errno_text(err));
      }
      if (switch_buf_of_cpu_[i] < 0) {
        auto rb = RingBuffer::map(sw.get(), switch_pages_, min_pages_);
        if (!rb) return std::move(rb).take_error();
        switch_buf_of_cpu_[i] = static_cast<int>(rings_.size());
        rings_.add(std::move(*rb), true);
      } else if (ioctl(sw.get(), PERF_EVENT_IOC_SET_OUTPUT,
                       rings_[static_cast<size_t>(switch_buf_of_cpu_[i])].fd()) != 0) {
        return Err("cannot share a perf ring buffer: " + errno_text(errno));
      }
      fds_.push_back(std::move(sw));
    }
  }
  if (!any && required) return Err("no CPU could be sampled");
  return {};
}

Status Session::attach_thread(int tid) {
  if (!attached_tids_.insert(tid).second) return {};
  return open_target(tid, false);
}

// One round: every buffer's new records, merged by time, through the builder (recorder/host.h).
size_t Session::read_round() {
  // The wakeups between collecting the records and handling them: every wake before a switch-in of the round
  // is in the tracer's ring by then. Their stacks are unwound at the end of the round, with the mappings its
  // records describe.
  return feed_round(*source_, *builder_, refs_, [this] { sync_waker(); });
}

// The waker tracer learns the processes the builder saw, and its wakeups go to the builder, which unwinds
// the wakers' stacks at the end of the round (ProfileBuilder::add_wakings).
void Session::sync_waker() {
  if (!waker_) return;
  for (uint32_t pid : builder_->take_new_pids()) waker_->trace(pid);
  wakings_.clear();
  waker_->drain(wakings_);
  if (capture_) capture_->wakings(wakings_);
  builder_->add_wakings(wakings_);  // takes their stacks
}

// The recording, as the passes it goes through, in order; a pass that fails ends it with its error. -v
// prints how long each took (one line at the end).
Result<Recording> Session::run() {
  const std::pair<const char*, Status (Session::*)()> passes[] = {
      {"plan", &Session::plan_buffers},
      {"start", launch_ ? &Session::start_launch : &Session::start_attach},
      {"read", &Session::read_until_stop},
      {"drain", &Session::drain},
      {"finish", &Session::finish_profile},
      {"summarize", &Session::summarize},
  };
  for (const auto& [name, step] : passes)
    if (auto s = pass(name, step); !s) return std::move(s).take_error();
  return std::move(rec_);
}

// Runs one pass and keeps its wall time for the -v line.
Status Session::pass(const char* name, Status (Session::*step)()) {
  const uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  Status s = (this->*step)();
  phases_.push_back({name, static_cast<double>(now_ns(CLOCK_MONOTONIC) - t0) / 1e6});
  return s;
}

// Plan: the event (rate, call graph, permissions) and the ring buffers' sizes, from the options and the
// kernel's limits, before anything is opened: every later pass only opens what this one decided.
Status Session::plan_buffers() {
  if (launch_ == !opt_.pids.empty())
    return Err(launch_ ? "give either a command or -p PID, not both"
                       : "nothing to record: give a command or -p PID");
  if (!(opt_.frequency_hz >= 1)) return Err("the sampling frequency must be at least 1 Hz");

  // Frequency: the kernel refuses rates above perf_event_max_sample_rate; lower to it, once, with a notice.
  freq_ = static_cast<uint64_t>(std::llround(opt_.frequency_hz));
  long max_rate = read_sysctl("/proc/sys/kernel/perf_event_max_sample_rate", 100000);
  if (max_rate > 0 && freq_ > static_cast<uint64_t>(max_rate)) {
    notice("sampling at " + std::to_string(max_rate) +
           " Hz, the kernel's limit (kernel.perf_event_max_sample_rate), " + "instead of " +
           std::to_string(freq_) + " Hz");
    freq_ = static_cast<uint64_t>(max_rate);
  }
  paranoid_ = read_sysctl("/proc/sys/kernel/perf_event_paranoid", 2);
  root_ = geteuid() == 0;  // (CAP_PERFMON/CAP_SYS_ADMIN are not checked: the first refusal tells)

  cfg_.hardware = !opt_.event;  // -e: that event, never the cycles probe
  cfg_.frequency = freq_;
  if (opt_.event) {
    cfg_.event_type = opt_.event->type;
    cfg_.event_config = opt_.event->config;
    cfg_.event_period = opt_.event_period ? opt_.event_period : opt_.event->period;
  }
  cfg_.dwarf = opt_.call_graph == CallGraph::Dwarf;
  cfg_.enable_on_exec = launch_;
  if (cfg_.dwarf) {
    uint32_t ss = std::min<uint32_t>(opt_.stack_size, 65528) & ~7u;
    cfg_.stack_size = std::max<uint32_t>(ss, 512);
    cfg_.switch_stack_size =
        std::max<uint32_t>(std::min<uint32_t>(opt_.off_cpu_stack_size, 65528) & ~7u, 512);
    cfg_.regs_mask = user_regs_mask();
    elf::LocatorOptions locator;
    locator.symbol_dirs = opt_.symbol_dirs;
    unwinder_ = std::make_unique<Unwinder>(std::move(locator));
  }

  // Ring buffers: DWARF samples are stack_size + ~1 KiB; keep ~32 of them per CPU. Unprivileged users get
  // kernel.perf_event_mlock_kb per CPU (516 KiB: 1 + 128 pages) before RLIMIT_MEMLOCK: stay within it.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (cfg_.dwarf) {
    data_pages_ = ceil_pow2(32 * (cfg_.stack_size + 1024) / page);
    min_pages_ = ceil_pow2(2 * (cfg_.stack_size + 1024) / page);
  } else {
    data_pages_ = 128;  // 512 KiB: ~3,500 FP samples
    min_pages_ = 8;
  }
  // -e: events come in bursts (a page-fault storm is a sample per microsecond): 16 MiB per CPU (64 MiB in
  // all, below) hold ~1,800 samples with 8 KiB stacks while the reader unwinds.
  if (opt_.event) data_pages_ = std::max<size_t>(data_pages_ * 8, ceil_pow2((16u << 20) / page));
  if (geteuid() != 0) {
    long mlock_kb = read_sysctl("/proc/sys/kernel/perf_event_mlock_kb", 516);
    size_t budget = mlock_kb > 0 ? static_cast<size_t>(mlock_kb) * 1024 / page : 129;
    data_pages_ = std::min(data_pages_, floor_pow2(budget > 1 ? budget - 1 : 1));
    min_pages_ = std::min(min_pages_, data_pages_);
  }
  if (opt_.buffer_bytes > 0) {  // --buffer-size: the user's choice (still within the mlock budget's fallback)
    data_pages_ = floor_pow2(std::max<size_t>(1, opt_.buffer_bytes / page));
    min_pages_ = std::min(min_pages_, data_pages_);
  }
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  for (int c = 0; c < std::max(1L, ncpu); ++c) cpus_.push_back(c);
  // Big machines: at most 64 MiB of ring buffers in all (2 MiB per CPU up to 32 CPUs).
  data_pages_ = std::min(data_pages_, std::max(min_pages_, floor_pow2((64u << 20) / page / cpus_.size())));
  cfg_.wakeup_bytes = static_cast<uint32_t>(data_pages_ * page / 4);
  // Context switches come in bursts of thousands per second, each with a stack copy: their buffers are 4x
  // larger (8 MiB per CPU with DWARF; off-CPU stacks need root or paranoid <= 1, so no mlock budget
  // applies to root, and an ordinary user's mmap falls back to halves) and wake the reader at a quarter
  // full like the others. Waking it every few switches would preempt the program as often.
  switch_pages_ =
      std::min(data_pages_ * 4, std::max(min_pages_, floor_pow2((128u << 20) / page / cpus_.size())));
  cfg_.switch_wakeup_bytes = static_cast<uint32_t>(switch_pages_ * page / 4);
  buf_of_cpu_.assign(cpus_.size(), -1);
  switch_buf_of_cpu_.assign(cpus_.size(), -1);

  model::Profile& prof = rec_.profile;
  prof.meta.interval_ms = 1000.0 / static_cast<double>(freq_);
  const auto cpuinfo = live_procfs().read("/proc/cpuinfo"), meminfo = live_procfs().read("/proc/meminfo");
  describe_machine(cpuinfo ? *cpuinfo : "", meminfo ? *meminfo : "", prof.meta);
  signals_.emplace();  // from here on a Ctrl-C is ours to handle: no pass may lose the recording to it
  return {};
}

// Probes the event on the first target (PMU, paranoid level, off-CPU rights) and makes the builder: both
// start passes need it before the first event runs.
Status Session::prepare_builder() {
  if (auto s = choose_config(pids_[0]); !s) return s;
  if (opt_.off_cpu) choose_off_cpu(pids_[0]);
  if (!opt_.capture_path.empty()) {
    auto w = CaptureWriter::create(opt_.capture_path);
    if (!w) return std::move(w).take_error();
    capture_ = std::move(*w);
    source_ = &capture_->tap(rings_);
    procfs_ = &capture_->tap(live_procfs());
  }
  builder_ = std::make_unique<ProfileBuilder>(rec_.profile, unwinder_.get(), cfg_, *procfs_);
  OffCpuConfig oc;
  if (opt_.off_cpu) {
    oc.spans = true;
    oc.stacks = switch_stacks_;
    oc.interval_ns = static_cast<uint64_t>(std::llround(1e9 / static_cast<double>(freq_)));
    oc.threshold_ns = static_cast<uint64_t>(std::max(0.0, opt_.off_cpu_threshold_ms) * 1e6);
    builder_->set_off_cpu(oc);
    if (switch_stacks_) {
      // Loading parses the kernel's BTF: 30-50 ms on an idle machine here, 70-120 ms under load, before the
      // program starts (loaded in the background, it named no waits of programs shorter than that).
      const uint64_t t0 = now_ns(CLOCK_MONOTONIC);
      auto w = WakerTracer::start(cfg_.dwarf);
      if (!w)
        notice("off-CPU: the thread that woke each wait is not recorded (eBPF waker tracer: " + w.error() +
               ")");
      else if (opt_.verbose)
        notice("eBPF waker tracer loaded in " + std::to_string((now_ns(CLOCK_MONOTONIC) - t0) / 1000000) +
               " ms");
      if (w) waker_ = std::move(*w);
    }
  }
  model::Profile& prof = rec_.profile;
  if (capture_) capture_->config(cfg_, opt_.off_cpu ? &oc : nullptr, prof.meta.interval_ms);
  prof.meta.start_monotonic_ns = now_ns(CLOCK_MONOTONIC);
  prof.meta.start_unix_ms = static_cast<double>(now_ns(CLOCK_REALTIME)) / 1e6;
  start_ns_ = prof.meta.start_monotonic_ns;
  return {};
}

// Start (launch): the child waits on a pipe until its events exist (enable_on_exec: counting starts at its
// exec, so fxprof's own fork is never sampled), then runs the command.
Status Session::start_launch() {
  auto c = SuspendedChild::spawn(opt_.command, signals_->old_mask());
  if (!c) return std::move(c).take_error();
  child_.emplace(std::move(*c));
  pids_.push_back(child_->pid());
  if (auto s = prepare_builder(); !s) return s;
  std::string cmdline;
  for (const std::string& a : opt_.command) cmdline += (cmdline.empty() ? "" : " ") + a;
  rec_.profile.meta.product = "fxprof: " + cmdline;
  rec_.profile.meta.machine.command_line = cmdline;
  if (auto s = open_target(child_->pid(), true); !s) return s;
  const std::string name(base_name(opt_.command[0]));
  if (capture_) capture_->launched(static_cast<uint32_t>(child_->pid()), name, start_ns_);
  builder_->add_launched(static_cast<uint32_t>(child_->pid()), name, start_ns_);
  sync_waker();
  if (auto s = child_->resume(); !s) return s;
  pidfds_.emplace_back(pidfd_open(child_->pid()));
  return {};
}

// Start (attach): one event per thread and CPU; the process's threads and mappings are read from /proc once
// the events run, so nothing that happens after is missed (and what happened before is in /proc).
Status Session::start_attach() {
  for (int pid : opt_.pids) {
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
      return Err("no process with pid " + std::to_string(pid));
    pids_.push_back(pid);
  }
  // One event per (thread, CPU); lift the soft fd limit for programs with many threads.
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (auto s = prepare_builder(); !s) return s;
  std::string list;
  for (int pid : pids_) list += (list.empty() ? "" : ",") + std::to_string(pid);
  rec_.profile.meta.product = "fxprof: attached to " + list;
  rec_.profile.meta.machine.command_line = "-p " + list;
  for (int pid : pids_) {
    for (uint32_t tid : list_tasks(static_cast<uint32_t>(pid)))
      if (auto s = attach_thread(static_cast<int>(tid)); !s) return s;
    // Events run from here on, so mappings and threads read now miss nothing that follows.
    if (capture_) capture_->attached(static_cast<uint32_t>(pid), start_ns_);
    builder_->add_attached(static_cast<uint32_t>(pid), start_ns_);
    sync_waker();
    // Threads started while we attached: scan again until no new ones (new ones after our events inherit).
    for (int round = 0; round < 20; ++round) {
      bool fresh = false;
      for (uint32_t tid : list_tasks(static_cast<uint32_t>(pid)))
        if (!attached_tids_.count(static_cast<int>(tid))) {
          fresh = true;
          if (auto s = attach_thread(static_cast<int>(tid)); !s) return s;
          const uint64_t t = now_ns(CLOCK_MONOTONIC);
          if (capture_) capture_->attached_thread(static_cast<uint32_t>(pid), tid, t);
          builder_->add_attached_thread(static_cast<uint32_t>(pid), tid, t);
        }
      if (!fresh) break;
    }
  }
  for (int pid : pids_) pidfds_.emplace_back(pidfd_open(pid));
  return {};
}

// Read until stop: wake on data (the buffers' watermark), a signal, a program's exit (pidfd), the RSS timer
// or every kPollMs, and feed what the buffers hold to the builder each time, so they never fill up.
Status Session::read_until_stop() {
  const uint64_t deadline =
      opt_.duration_s > 0 ? start_ns_ + static_cast<uint64_t>(opt_.duration_s * 1e9) : 0;
  std::vector<bool> hung(rings_.size(), false), exited(pidfds_.size(), false);
  std::vector<pollfd> pfds;
  rss_.emplace(*procfs_);  // every process's RSS counter (recorder/rss.h): its timer is the last pollfd
  counters_.emplace(*procfs_);
  if (!launch_) counters_->set_attached();
  bool stop = false;
  while (!stop) {
    pfds.clear();
    pfds.push_back({signals_->fd(), POLLIN, 0});
    for (size_t i = 0; i < pidfds_.size(); ++i)
      pfds.push_back({exited[i] ? -1 : pidfds_[i].get(), POLLIN, 0});
    for (size_t b = 0; b < rings_.size(); ++b) pfds.push_back({hung[b] ? -1 : rings_[b].fd(), POLLIN, 0});
    pfds.push_back({waker_ ? waker_->fd() : -1, POLLIN, 0});  // its ring buffer a quarter full
    pfds.push_back({rss_->fd(), POLLIN, 0});
    int timeout = kPollMs;
    if (deadline) {
      uint64_t now = now_ns(CLOCK_MONOTONIC);
      if (now >= deadline) break;
      timeout = static_cast<int>(std::min<uint64_t>(kPollMs, (deadline - now) / 1000000 + 1));
    }
    int n = poll(pfds.data(), pfds.size(), timeout);
    if (n < 0 && errno != EINTR) break;
    for (size_t b = 0; b < rings_.size(); ++b)
      if (pfds[1 + pidfds_.size() + b].revents & (POLLHUP | POLLERR)) hung[b] = true;
    read_round();
    const uint64_t now = now_ns(CLOCK_MONOTONIC);
    builder_->follow_jit_maps(now);  // perf map lines stamped as they appear (recorder/jit.h)
    if (capture_) capture_->rss_tick(now);
    rss_->tick(rec_.profile, now);
    counters_->tick(rec_.profile, now);

    signalfd_siginfo si;
    while (signals_->next(si)) {
      if (si.ssi_signo == SIGHUP) rec_.hangup = true;
      if (!launch_) {
        stop = true;  // attach mode: Ctrl-C ends the recording, the processes run on untouched
      } else if ((si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE) && si.ssi_pid != 0 &&
                 static_cast<pid_t>(si.ssi_pid) != child_->pid()) {
        kill(child_->pid(), static_cast<int>(si.ssi_signo));  // sent to us alone: pass it on
      }  // from the terminal: the program (same process group) got it too; we record until it exits
    }
    for (size_t i = 0; i < pidfds_.size(); ++i) {
      bool gone = false;
      if (!pidfds_[i].valid()) {
        gone = kill(pids_[i], 0) != 0 && errno == ESRCH;
      } else if (pfds[1 + i].revents & POLLIN) {
        gone = true;
      }
      if (gone && !exited[i]) {
        exited[i] = true;
        if (launch_) reap(pids_[i]);
      }
    }
    if (launch_ && child_exited_) stop = true;
    if (!launch_ && std::all_of(exited.begin(), exited.end(), [](bool e) { return e; })) stop = true;
  }
  exit_seen_ns_ = now_ns(CLOCK_MONOTONIC);
  return {};
}

// The launched program ended: its exit status (128+signal when killed) and CPU time become ours.
void Session::reap(int pid) {
  int st = 0;
  pid_t r;
  rusage ru{};
  while ((r = wait4(pid, &st, 0, &ru)) < 0 && errno == EINTR) {
  }
  if (r == pid) {
    rec_.exit_status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    rec_.stats.program_cpu_ms = cpu_ms(ru);
  }
  child_exited_ = true;
}

// Drain: stop the events, then read what they wrote before they stopped, so the end of the program is in.
Status Session::drain() {
  for (UniqueFd& fd : fds_) ioctl(fd.get(), PERF_EVENT_IOC_DISABLE, 0);
  while (read_round() > 0) {
  }
  rec_.profile.meta.end_monotonic_ns = now_ns(CLOCK_MONOTONIC);
  return {};
}

// Finish: what could only be done once every record is in: waits still open end at the exit, kernel and
// JIT frames get their names (kallsyms is read once, here), the RSS series become counters.
Status Session::finish_profile() {
  if (capture_) capture_->end(exit_seen_ns_);
  builder_->close_off_spans(exit_seen_ns_);
  builder_->finish();
  rss_->finish(rec_.profile);
  counters_->finish(rec_.profile);
  if (opt_.verbose && counters_->ticks())
    notice("counter tracks (faults, switches, run delay): " + std::to_string(counters_->ticks()) + " ticks, " +
           std::to_string(counters_->tick_ns() / counters_->ticks() / 1000) + " us each, " +
           std::to_string(counters_->tick_ns() / 1000000) + " ms in all");
  if (capture_) return capture_->flush();
  return {};
}

// Summarize: the counts the CLI prints, the data-quality lines (lost records, incomplete stacks) and, with
// -v, what the recorder chose and how long each pass took.
Status Session::summarize() {
  model::Profile& prof = rec_.profile;
  Stats& st = rec_.stats;
  st.samples = builder_->samples() + builder_->off_cpu_samples();
  st.off_cpu_stacks = switch_stacks_;
  st.switch_samples = builder_->switch_samples();
  st.off_cpu_spans = builder_->off_cpu_spans();
  st.off_cpu_samples = builder_->off_cpu_samples();
  st.lost_records = builder_->lost();
  st.throttles = builder_->throttled();
  st.processes = static_cast<uint32_t>(prof.processes.size());
  for (const model::Process& p : prof.processes) st.threads += static_cast<uint32_t>(p.threads.size());
  st.duration_s = static_cast<double>(exit_seen_ns_ - start_ns_) / 1e9;
  st.kernel_frames = !cfg_.exclude_kernel;
  st.hardware_event = cfg_.hardware;
  st.frequency_hz = static_cast<double>(freq_);
  st.event_period = cfg_.event_period;
  st.finish_ms = static_cast<double>(now_ns(CLOCK_MONOTONIC) - exit_seen_ns_) / 1e6;
  rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) st.reader_cpu_ms = cpu_ms(ru);
  if (unwinder_) report_stack_walk(prof);
  report_data_quality(prof);
  rec_.open_files = builder_->take_kept_files();  // deleted binaries are read through them (Lib::read_path)
  if (child_ && !child_exited_) rec_.exit_status = 0;  // --duration: the program keeps running
  if (opt_.verbose) verbose_summary();
  return {};
}

void Session::verbose_summary() {
  const Stats& st = rec_.stats;
  if (unwinder_) {
    const UnwindStats& u = unwinder_->stats();
    notice("DWARF unwinding: " + std::to_string(u.stacks) + " stacks, " + std::to_string(u.complete) +
           " complete, " + std::to_string(u.truncated) + " truncated by the " +
           std::to_string(cfg_.stack_size) + "-byte copy, " + std::to_string(u.failed) + " failed; " +
           std::to_string(u.modules) + " binaries; through code without CFI: " + std::to_string(u.fp_stacks) +
           " by frame pointers, " + std::to_string(u.scanned_stacks) + " by scanning for return addresses");
  }
  if (builder_->jit_functions() > 0)
    notice(std::to_string(builder_->jit_functions()) +
           " JIT code ranges named from perf maps and jitdump files");
  if (opt_.off_cpu)
    notice("off-CPU: " + std::to_string(st.off_cpu_spans) + " blocked or preempted spans, " +
           std::to_string(st.switch_samples) + " context-switch stacks (" +
           std::to_string(builder_->switch_stacks_unwound()) + " unwound: the others' spans needed none), " +
           std::to_string(st.off_cpu_samples) + " off-CPU samples" +
           (switch_stacks_ ? "" : " (no stacks: spans as markers only)"));
  if (waker_) {
    // Its cost, in the threads that woke others: known only while kernel.bpf_stats_enabled is 1.
    const auto [runs, run_ns] = waker_->run_stats();
    char cost[96] = "";
    if (runs > 0)
      std::snprintf(cost, sizeof cost, "; %llu runs, %.2f us a run", static_cast<unsigned long long>(runs),
                    static_cast<double>(run_ns) / 1e3 / static_cast<double>(runs));
    notice("eBPF waker tracer: " + std::to_string(builder_->wakes()) + " wakeups, " +
           std::to_string(builder_->waker_stacks()) + " waker stacks unwound (futex wakes), " +
           std::to_string(waker_->dropped()) + " lost" + cost);
  }
  notice("recording thread CPU time " + std::to_string(static_cast<int>(st.reader_cpu_ms)) + " ms");
  notice(std::to_string(st.samples) + " samples, " + std::to_string(st.threads) + " threads in " +
         std::to_string(st.processes) + " processes; profile built " + std::to_string(st.finish_ms) +
         " ms after the recording ended");
  // The passes' wall times (summarize, which prints this, is not in it); "read" is the program's run time.
  std::string line = "passes:";
  char buf[64];
  for (const Phase& ph : phases_) {
    std::snprintf(buf, sizeof buf, " %s %.1f ms,", ph.name, ph.ms);
    line += buf;
  }
  line.pop_back();
  notice(line);
}

}  // namespace

std::vector<ProcessInfo> descendants(int pid, size_t limit) {
  // pid -> (ppid, comm) of every process; /proc/PID/stat is "pid (comm) state ppid ...", comm may hold
  // spaces and parentheses: the last ')' ends it.
  std::vector<std::pair<int, ProcessInfo>> all;  // (ppid, process)
  for (uint32_t id : live_procfs().list("/proc")) {
    if (id == 0) continue;
    auto stat = live_procfs().read("/proc/" + std::to_string(id) + "/stat");
    if (!stat) continue;
    size_t open = stat->find('('), close = stat->rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat->c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
    all.push_back({ppid, {static_cast<int>(id), stat->substr(open + 1, close - open - 1)}});
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second.pid < b.second.pid; });
  std::vector<ProcessInfo> out;
  std::vector<int> frontier{pid};
  while (!frontier.empty() && out.size() < limit) {
    std::vector<int> next;
    for (int parent : frontier)
      for (const auto& [ppid, info] : all)
        if (ppid == parent && out.size() < limit) {
          out.push_back(info);
          next.push_back(info.pid);
        }
    frontier = std::move(next);
  }
  return out;
}

std::string no_samples_message(const Options& options, const Stats& stats) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", stats.duration_s);
  if (!stats.not_followed.empty())  // the kernel dropped the events: CPU use was not the reason
    return "no samples: " + stats.not_followed + "; no profile written";
  if (options.pids.empty()) {
    std::string program =
        options.command.empty() ? "the program" : std::string(base_name(options.command[0]));
    if (options.event)
      return "no samples: " + program + " and what it started had fewer than " +
             std::to_string(stats.event_period) + " " + options.event->name +
             " events (one sample per " + std::to_string(stats.event_period) +
             "); nothing to profile, no profile written. Lower the period (-c)";
    std::string msg =
        "no samples: " + program + " and what it started used less CPU than one sampling interval";
    if (stats.program_cpu_ms >= 0) {
      char cpu[64];
      std::snprintf(cpu, sizeof cpu, " (%.1f ms of CPU", stats.program_cpu_ms);
      msg += std::string(cpu) + " at " + std::to_string(static_cast<long>(stats.frequency_hz)) + " Hz)";
    }
    return msg + "; nothing to profile, no profile written. Profile a longer run or raise -F";
  }
  std::string list, msg = "no samples: ";
  std::vector<ProcessInfo> kids;
  for (size_t i = 0; i < options.pids.size(); ++i) {
    const int pid = options.pids[i];
    list += (i ? "," : "") + std::to_string(pid);
    msg += (i ? ", " : "") + std::string("pid ") + std::to_string(pid);
    if (auto comm = live_procfs().read("/proc/" + std::to_string(pid) + "/comm"); comm && !comm->empty())
      msg += " (" + comm->substr(0, comm->find('\n')) + ")";
    for (ProcessInfo& k : descendants(pid)) kids.push_back(std::move(k));
  }
  const bool many = options.pids.size() > 1;
  msg += std::string(" used no CPU during the ") + secs + " recorded; no profile written.";
  if (kids.empty())
    return msg + (many ? " They have" : " It has") +
           " no child processes either: record while it is busy, or longer (-d)";
  msg += std::string(" ") + (many ? "Their" : "Its") +
         " running child processes were not recorded (-p follows what the processes start later, not what "
         "already runs):";
  std::string add;
  for (const ProcessInfo& k : kids) {
    msg += " " + std::to_string(k.pid) + " (" + k.name + ")";
    add += "," + std::to_string(k.pid);
  }
  return msg + ". Add them: -p " + list + add;
}

Result<Recording> record(const Options& options) {
  Session s(options);
  return s.run();
}

}  // namespace fxprof::recorder
