#include "counters/stat.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "base/fd.h"
#include "base/signals.h"
#include "counters/count_sink.h"
#include "driver/sources.h"
#include "perf/launcher.h"
#include "perf/records.h"
#include "perf/ring.h"

namespace fxprof::counters {

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string base_name(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// What read(2) returns for read_format ENABLED|RUNNING|ID, and what a PERF_RECORD_READ carries.
struct ReadValue {
  uint64_t value, enabled, running, id;
};
uint64_t scaled(const ReadValue& v) {
  if (v.running == 0 || v.running >= v.enabled) return v.value;
  return static_cast<uint64_t>(static_cast<double>(v.value) * static_cast<double>(v.enabled) /
                               static_cast<double>(v.running));
}

// The side-band records (fork, comm, exit) and each exiting thread's counts come through one ring per CPU.
constexpr size_t kRingPages = 64;

struct Session {
  const StatOptions& opt;
  StatResult res;
  bool exclude_kernel = false;
  std::vector<std::vector<UniqueFd>> fds;      // [event][cpu or thread]
  std::vector<std::vector<size_t>> target_of;  // attach: per fds[e][j], the index of its thread in targets
  std::map<uint64_t, size_t> event_of_id;
  std::vector<perf::RingBuffer> rings;  // launch: one per CPU while open_all opens them, then read_by's
  perf::Layout layout;                  // the records' layout: every event has the same read_format
  std::vector<UniqueFd> anchors;        // launch: a non-inherited dummy event per CPU (open_all says why)
  rlimit nofile{};                      // the caller's fd limit, for the launched program
  // Launch mode: the rings read by the driver into the counting sink, a round each time the loop polls.
  // Their records carry no time (no sample_id_all): sums need none, and each buffer's order is kept.
  driver::RingSet ring_set{[](const perf_event_header*) { return uint64_t{0}; }};
  std::unique_ptr<driver::Source> source;
  std::optional<CountSink> sink;
  std::optional<driver::Driver> driver;

  explicit Session(const StatOptions& o) : opt(o) {}

  // Opens every event on `pid` (one per CPU in launch mode, cpu -1 for an attached thread). The first
  // refusal decides: unsupported hardware is unavailable, a permission refusal retries user-only.
  Status open_all(const std::vector<int>& targets, bool launch) {
    const long ncpu = std::max(1L, sysconf(_SC_NPROCESSORS_CONF));
    for (int attempt = 0; attempt < 2; ++attempt) {
      fds.clear();
      fds.resize(res.events.size());
      target_of.assign(res.events.size(), {});
      event_of_id.clear();
      rings.clear();
      bool retry = false;
      for (size_t e = 0; e < res.events.size() && !retry; ++e) {
        res.total[e].available = true;
        perf_event_attr a = counting_attr(res.events[e], exclude_kernel, launch);
        if (launch) a.inherit_stat = 1;
        const size_t n = launch ? static_cast<size_t>(ncpu) : targets.size();
        for (size_t k = 0; k < n; ++k) {
          const int pid = launch ? targets[0] : targets[k];
          const int cpu = launch ? static_cast<int>(k) : -1;
          perf_event_attr ak = a;
          const bool ring_owner = launch && rings.size() <= k;
          if (ring_owner) {
            ak.task = 1;
            ak.comm = 1;
            ak.comm_exec = 1;
            ak.watermark = 1;
            ak.wakeup_watermark = static_cast<uint32_t>(kRingPages * sysconf(_SC_PAGESIZE) / 4);
          }
          int err = 0;
          UniqueFd fd = perf::perf_event_open(ak, pid, cpu, -1, err);
          if (!fd.valid()) {
            if (err == ESRCH && !launch) continue;  // a thread that just exited
            if ((err == EACCES || err == EPERM) && !exclude_kernel && geteuid() != 0) {
              exclude_kernel = true;
              res.user_only = true;
              res.notices.push_back(
                  "kernel.perf_event_paranoid lets ordinary users count only user space: counting without "
                  "the kernel's share (as root or with paranoid <= 1, the kernel's share too)");
              retry = true;
              break;
            }
            if (unsupported_errno(err) || err == EACCES || err == EPERM) {
              res.total[e].available = false;
              fds[e].clear();
              break;
            }
            return Err("cannot count " + res.events[e].name + ": perf_event_open: " + errno_text(err));
          }
          uint64_t id = 0;
          if (ioctl(fd.get(), PERF_EVENT_IOC_ID, &id) == 0) event_of_id[id] = e;
          if (ring_owner) {
            if (layout.attrs().empty()) layout = perf::Layout({perf::EventAttr::of(ak)});
            auto rb = perf::RingBuffer::map(fd.get(), kRingPages, kRingPages);
            if (!rb) return std::move(rb).take_error();
            rings.push_back(std::move(*rb));
          } else if (launch) {
            if (ioctl(fd.get(), PERF_EVENT_IOC_SET_OUTPUT, ring_fd(k)) != 0)
              return Err("cannot share the counters' ring buffer: " + errno_text(errno));
          }
          if (!launch) target_of[e].push_back(k);
          fds[e].push_back(std::move(fd));
        }
      }
      if (retry) continue;
      if (exclude_kernel) mark_kernel_only();
      anchors.clear();
      if (launch) open_anchors(targets[0], ncpu);
      return {};
    }
    return Err("perf_event_open refused every event");
  }
  // Switches and migrations happen in the scheduler, never in user mode: user-space only they would read 0
  // whatever the program did.
  void mark_kernel_only() {
    std::string names;
    for (size_t e = 0; e < res.events.size(); ++e)
      if (res.events[e].type == PERF_TYPE_SOFTWARE &&
          (res.events[e].config == PERF_COUNT_SW_CONTEXT_SWITCHES ||
           res.events[e].config == PERF_COUNT_SW_CPU_MIGRATIONS)) {
        res.total[e].available = false;
        res.total[e].kernel_only = true;  // (its fds stay open: one may own a CPU's ring buffer)
        names += (names.empty() ? "" : " and ") + res.events[e].name;
      }
    if (!names.empty())
      res.notices.push_back(names + " happen in the kernel: not counted user-space only (<not counted>)");
  }
  // The kernel swaps the contexts of a parent and a child on a context switch between them when the child's
  // is a full clone; the launched process's own events would then be the child's, and its exit would report
  // nothing. A non-inherited event in the launched process's context makes every child's context a partial
  // clone, never swapped with it (children's among themselves are, with their counts).
  void open_anchors(int pid, long ncpu) {
    perf_event_attr d;
    std::memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.type = PERF_TYPE_SOFTWARE;
    d.config = PERF_COUNT_SW_DUMMY;
    d.disabled = 1;
    d.enable_on_exec = 1;
    d.exclude_kernel = exclude_kernel ? 1 : 0;
    for (size_t k = 0; k < static_cast<size_t>(ncpu); ++k) {
      int err = 0;
      anchors.push_back(perf::perf_event_open(d, pid, static_cast<int>(k), -1, err));
    }
  }
  // The fd that owns CPU k's ring: the first available event's.
  int ring_fd(size_t k) const {
    for (const auto& f : fds)
      if (f.size() > k) return f[k].get();
    return -1;
  }

  // The launched program `pid`'s records: the rings through the driver into the counting sink.
  void read_by(uint32_t pid, const std::string& name) {
    sink.emplace(res.events.size(), layout, event_of_id);
    for (perf::RingBuffer& r : rings) ring_set.add(std::move(r), false);
    rings.clear();
    source = driver::buffer_source(ring_set);
    driver.emplace(*sink);
    driver->add(*source);
    sink->on_launched(pid, name, now_ns());
  }
  void drain() { driver->round(); }

  // Software events never multiplex. A hardware counter the PMU shared with others counted only part of the
  // time: attached (one event per thread) its enabled/running times say which part, as in perf. Launched,
  // the events are per CPU, and one is "enabled" while its task runs on another CPU too; there the part is
  // the time counted against the threads' time on a CPU (task-clock), when that is counted.
  void read_totals(bool launch) {
    double task_clock_ns = 0;
    for (size_t e = 0; e < fds.size(); ++e)
      if (res.events[e].name == "task-clock" && res.total[e].available) task_clock_ns = -1;  // read below
    std::vector<uint64_t> running(fds.size(), 0);
    for (size_t e = 0; e < fds.size(); ++e) {
      if (!res.total[e].available) continue;
      const bool hw = res.events[e].source == Source::Hardware;
      uint64_t sum = 0, enabled = 0;
      for (const UniqueFd& fd : fds[e]) {
        ReadValue v{};
        if (read(fd.get(), &v, sizeof v) != static_cast<ssize_t>(sizeof v)) continue;
        sum += hw && !launch ? scaled(v) : v.value;
        enabled += v.enabled;
        running[e] += v.running;
      }
      res.total[e].value = sum;
      if (hw && !launch && enabled)
        res.total[e].running = std::min(1.0, static_cast<double>(running[e]) / static_cast<double>(enabled));
      if (res.events[e].name == "task-clock" && task_clock_ns < 0) task_clock_ns = static_cast<double>(sum);
    }
    if (!launch || task_clock_ns <= 0) return;
    for (size_t e = 0; e < fds.size(); ++e) {
      if (!res.total[e].available || res.events[e].source != Source::Hardware) continue;
      const double part = static_cast<double>(running[e]) / task_clock_ns;
      if (part > 0 && part < 0.98) {
        res.total[e].running = part;
        res.total[e].value = static_cast<uint64_t>(static_cast<double>(res.total[e].value) / part);
      }
    }
  }
};

Result<StatResult> launch(Session& s) {
  SignalReader sig;
  auto child = perf::SuspendedChild::spawn(s.opt.command, sig.old_mask(),
                                           s.nofile.rlim_max ? std::optional(s.nofile) : std::nullopt);
  if (!child) return std::move(child).take_error();
  const pid_t pid = child->pid();
  if (auto st = s.open_all({pid}, true); !st) return std::move(st).take_error();  // the child exits unrun
  s.read_by(static_cast<uint32_t>(pid), base_name(s.opt.command[0]));
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  const uint64_t t0 = now_ns();
  if (auto st = child->resume(); !st) return std::move(st).take_error();
  int status = 0;
  rusage ru{};
  for (;;) {
    std::vector<pollfd> pfds{{sig.fd(), POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
    poll(pfds.data(), pfds.size(), pidfd.valid() ? 100 : 20);
    signalfd_siginfo si;
    while (sig.next(si))  // sent to fxprof alone: the program decides (the terminal's reach it too)
      if (SignalReader::from_user(si)) kill(pid, static_cast<int>(si.ssi_signo));
    s.drain();
    const pid_t w = wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return Err("waitpid: " + errno_text(errno));
  }
  s.res.elapsed_s = static_cast<double>(now_ns() - t0) / 1e9;
  s.res.exit_status = perf::exit_status_of(status);
  s.drain();
  s.read_totals(true);
  // The launched process's own threads: the total less what every other thread reported at its exit.
  const std::vector<uint64_t> reported = s.sink->reported();
  std::vector<uint64_t> own(reported.size(), 0);
  for (size_t e = 0; e < reported.size(); ++e)
    own[e] = s.res.total[e].value > reported[e] ? s.res.total[e].value - reported[e] : 0;
  s.sink->add(static_cast<uint32_t>(pid), own);
  s.driver->end(now_ns());
  if (s.sink->lost())
    s.res.notices.push_back("the per-process counts are incomplete (" + std::to_string(s.sink->lost()) +
                            " records lost); the totals are exact");
  return std::move(s.res);
}

Result<StatResult> attach(Session& s) {
  SignalReader sig;
  std::vector<int> threads;
  std::vector<int> owner_of_thread;
  for (size_t i = 0; i < s.opt.pids.size(); ++i) {
    const int pid = s.opt.pids[i];
    if (kill(pid, 0) != 0 && errno == ESRCH) return Err("no process with pid " + std::to_string(pid));
    auto dir = UniqueFd(
        open(("/proc/" + std::to_string(pid) + "/task").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    std::vector<int> tids;
    if (dir.valid()) {
      auto* d = fdopendir(dup(dir.get()));
      if (d) {
        while (auto* ent = readdir(d)) {
          const int tid = std::atoi(ent->d_name);
          if (tid > 0) tids.push_back(tid);
        }
        closedir(d);
      }
    }
    if (tids.empty()) tids.push_back(pid);
    for (int t : tids) {
      threads.push_back(t);
      owner_of_thread.push_back(static_cast<int>(i));
    }
  }
  if (auto st = s.open_all(threads, false); !st) return std::move(st).take_error();
  if (s.opt.attached) s.opt.attached();
  std::vector<UniqueFd> pidfds;
  for (int pid : s.opt.pids) pidfds.emplace_back(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  const uint64_t t0 = now_ns();
  const uint64_t end = s.opt.duration_s > 0 ? t0 + static_cast<uint64_t>(s.opt.duration_s * 1e9) : 0;
  for (;;) {
    std::vector<pollfd> pfds{{sig.fd(), POLLIN, 0}};
    for (const UniqueFd& p : pidfds) pfds.push_back({p.get(), POLLIN, 0});
    int timeout = 200;
    if (end)
      timeout =
          static_cast<int>(std::min<uint64_t>(200, (end > now_ns() ? end - now_ns() : 0) / 1000000 + 1));
    poll(pfds.data(), pfds.size(), timeout);
    if (signalfd_siginfo si; sig.next(si)) break;
    if (end && now_ns() >= end) break;
    // Gone: its pidfd is readable (it exited, a zombie of someone else's included), or without pidfds
    // kill(0) finds no process.
    bool alive = false;
    for (size_t i = 0; i < s.opt.pids.size(); ++i)
      alive |=
          pidfds[i].valid() ? !(pfds[1 + i].revents & POLLIN) : kill(s.opt.pids[i], 0) == 0 || errno != ESRCH;
    if (!alive) break;
  }
  s.res.elapsed_s = static_cast<double>(now_ns() - t0) / 1e9;
  s.read_totals(false);
  // Per given process: the sum of its threads' events.
  for (size_t i = 0; i < s.opt.pids.size(); ++i) {
    ProcessCounts pc;
    pc.pid = static_cast<uint32_t>(s.opt.pids[i]);
    auto comm = read_file("/proc/" + std::to_string(pc.pid) + "/comm");
    pc.name = comm ? comm->substr(0, comm->find('\n')) : "pid " + std::to_string(pc.pid);
    pc.values.assign(s.res.events.size(), 0);
    s.res.processes.push_back(std::move(pc));
  }
  for (size_t e = 0; e < s.fds.size(); ++e)
    for (size_t j = 0; j < s.fds[e].size(); ++j) {
      ReadValue v{};
      if (read(s.fds[e][j].get(), &v, sizeof v) == static_cast<ssize_t>(sizeof v))
        s.res.processes[static_cast<size_t>(owner_of_thread[s.target_of[e][j]])].values[e] += scaled(v);
    }
  return std::move(s.res);
}

}  // namespace

Result<StatResult> run_stat(const StatOptions& options) {
  if (options.command.empty() == options.pids.empty())
    return Err(options.command.empty() ? "nothing to count: give a command or -p PID"
                                       : "give either a command or -p PID, not both");
  // An event per CPU (launch) or per thread (attach) for each event counted: lift the soft fd limit (the
  // launched program gets its own back before its exec).
  Session s(options);
  if (getrlimit(RLIMIT_NOFILE, &s.nofile) == 0 && s.nofile.rlim_cur < s.nofile.rlim_max) {
    rlimit raised = s.nofile;
    raised.rlim_cur = raised.rlim_max;
    setrlimit(RLIMIT_NOFILE, &raised);
  }
  s.res.pmu = have_pmu();
  s.res.events = options.events.empty() ? default_stat_events(s.res.pmu) : options.events;
  s.res.total.assign(s.res.events.size(), {});
  s.res.command = options.command;
  if (options.command.empty()) {
    std::string p;
    for (int pid : options.pids) p += (p.empty() ? "" : ",") + std::to_string(pid);
    s.res.command = {"pid " + p};
  }
  bool hw_asked = false;
  for (const EventSpec& e : s.res.events) hw_asked |= e.source == Source::Hardware;
  if (!s.res.pmu && (hw_asked || options.events.empty())) s.res.notices.push_back(no_pmu_message("stat"));
  auto r = options.command.empty() ? attach(s) : launch(s);
  if (!r) return r;
  // A hardware event refused on a machine that has a PMU (a guest that exposes none of them, a hybrid core).
  if (r->pmu)
    for (size_t e = 0; e < r->events.size(); ++e)
      if (!r->total[e].available && r->events[e].source == Source::Hardware) {
        r->notices.push_back("the PMU here does not count " + r->events[e].name +
                             ": shown as <not supported>");
      }
  if (options.command.size() && r->processes.empty()) r->processes = s.sink->processes();
  return r;
}

}  // namespace fxprof::counters
