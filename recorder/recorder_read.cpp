// The recorder's read and drain passes (session.h): rounds of records from the ring buffers (and the waker
// tracer) into the builder until the program exits, the duration ends or a signal comes, then the rest.
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

#include "recorder/session.h"

namespace fxprof::recorder::internal {

namespace {

constexpr int kPollMs = 25;  // upper bound on how late we notice anything the kernel does not wake us for
// Continuous recording (Options::on_window, `fxprof agent` at 19 Hz): 5 reads a second, not 40; the rings'
// watermark still wakes us when they fill (each wake-up cost the agent more than the samples it read).
constexpr int kWindowPollMs = 200;
// A live round's watermark (driver.h's Round::until) is this much before the round began. The kernel stamps
// a record before it reserves its space (perf_prepare_sample, perf_event_header__init_id come before
// perf_output_begin) and publishes the buffer's head only when the outermost writer of that CPU is done (a
// sample's NMI inside a fork record's write waits for it), and a writer in task context (fork, comm,
// switch) can be preempted, or its vCPU descheduled by the host, in between: a record stamped just before
// the round began can appear in its buffer after the round read it. 1 ms covers a preemption or a host's
// tick; a record later still is what the task tracker copes with (TaskTracker::on_fork adopts a thread
// named before its fork). The cost: records of the last millisecond come a round (25 ms) later.
constexpr uint64_t kLatePublishNs = 1'000'000;

}  // namespace

// One round: every live source's new records (the ring buffers', merged by time) and wakeups (the waker
// tracer's) through the driver into the builder (driver/driver.h, driver/sources.h). A reading round takes
// what happened before it began (less kLatePublishNs): a record written into a buffer after the round read
// it must not come after newer records of the buffers read later. `everything`: the rings are emptied (the
// drain, a window's cut).
size_t Session::read_round(bool everything) {
  if (waker_loader_) poll_waker_loader();
  const uint64_t until = everything ? driver::kEverything : now_ns(CLOCK_MONOTONIC) - kLatePublishNs;
  const size_t n = driver_->round(until);
  // Without a waker tracer nobody is told the new processes: not kept (-a sees thousands come and go),
  // unless it is loading: then it traces them once attached.
  if (!waker_) {
    std::vector<uint32_t> pids = builder_->take_new_pids();
    if (waker_loader_) untraced_pids_.insert(untraced_pids_.end(), pids.begin(), pids.end());
  }
  return n;
}

void Session::trace_new_pids() {
  if (waker_) {
    for (uint32_t pid : builder_->take_new_pids()) waker_->trace(pid);
  } else if (waker_loader_) {
    std::vector<uint32_t> pids = builder_->take_new_pids();
    untraced_pids_.insert(untraced_pids_.end(), pids.begin(), pids.end());
  }
}

// The tracer loading beside the program (waker.h's WakerLoader): adopted at the first round after its load.
void Session::poll_waker_loader() {
  auto r = waker_loader_->take();
  if (!r) return;
  const uint64_t began = waker_loader_->began_ns();
  waker_loader_.reset();
  adopt_waker(std::move(*r), began);
}

// Read until stop: wake on data (the buffers' watermark), a signal, a program's exit (pidfd), the RSS timer
// or every kPollMs, and feed what the buffers hold to the builder each time, so they never fill up.
Status Session::read_until_stop() {
  // -a: counted from now: attaching every running process (the start pass) takes seconds on a busy machine.
  const uint64_t from = system_ ? now_ns(CLOCK_MONOTONIC) : start_ns_;
  const uint64_t deadline = opt_.duration_s > 0 ? from + static_cast<uint64_t>(opt_.duration_s * 1e9) : 0;
  // Options::window_s: the samples are cut into windows at these times (recorder_window.cpp).
  const uint64_t window_ns = opt_.on_window ? static_cast<uint64_t>(opt_.window_s * 1e9) : 0;
  uint64_t next_cut = window_ns ? from + window_ns : 0;
  window_start_ns_ = from;
  std::vector<bool> hung(rings_.size(), false), exited(pidfds_.size(), false);
  std::vector<pollfd> pfds;
  rss_.emplace(*procfs_);  // every process's RSS counter (recorder/rss.h): its timer is the last pollfd
  counters_.emplace(*procfs_);
  if (!launch_) counters_->set_attached();
  // -a: no RSS or counter tracks: reading /proc for every process of the machine 100 times a second would
  // cost more than the sampling.
  // Continuous (Options::on_window): none either; the windows carry samples only.
  const bool proc_tracks = !system_ && !opt_.on_window;
  bool stop = false;
  while (!stop) {
    pfds.clear();
    pfds.push_back({signals_->fd(), POLLIN, 0});
    for (size_t i = 0; i < pidfds_.size(); ++i)
      pfds.push_back({exited[i] ? -1 : pidfds_[i].get(), POLLIN, 0});
    for (size_t b = 0; b < rings_.size(); ++b) pfds.push_back({hung[b] ? -1 : rings_[b].fd(), POLLIN, 0});
    pfds.push_back({waker_ ? waker_->fd() : -1, POLLIN, 0});  // its ring buffer a quarter full
    pfds.push_back({proc_tracks ? rss_->fd() : -1, POLLIN, 0});
    pfds.push_back({waker_loader_ ? waker_loader_->fd() : -1, POLLIN, 0});  // the tracer's load ended
    const int poll_ms = opt_.on_window ? kWindowPollMs : kPollMs;
    int timeout = poll_ms;
    if (deadline) {
      uint64_t now = now_ns(CLOCK_MONOTONIC);
      if (now >= deadline) break;
      timeout = static_cast<int>(std::min<uint64_t>(poll_ms, (deadline - now) / 1000000 + 1));
    }
    if (next_cut) {
      const uint64_t now = now_ns(CLOCK_MONOTONIC);
      timeout =
          now >= next_cut ? 0 : static_cast<int>(std::min<uint64_t>(timeout, (next_cut - now) / 1000000 + 1));
    }
    int n = poll(pfds.data(), pfds.size(), timeout);
    if (n < 0 && errno != EINTR) break;
    // Perf map lines are stamped with the follower's previous look (recorder/jit.h): looking before and after
    // the round halves how long a reused address is ambiguous when the round is slow (a loaded machine: an
    // attached node had 69% of its comparator samples named right instead of 95%).
    const uint64_t before = now_ns(CLOCK_MONOTONIC);
    builder_->tick(before);
    for (size_t b = 0; b < rings_.size(); ++b)
      if (pfds[1 + pidfds_.size() + b].revents & (POLLHUP | POLLERR)) hung[b] = true;
    // A window's cut takes every sample before it: the round before it empties the rings.
    const bool cut = next_cut && before >= next_cut;
    read_round(cut);
    const uint64_t now = now_ns(CLOCK_MONOTONIC);
    builder_->tick(now);  // perf map lines stamped as they appear (recorder/jit.h)
    if (capture_) capture_->rss_tick(now);
    if (proc_tracks) {
      rss_->tick(rec_.profile, now);
      counters_->tick(rec_.profile, now);
    }

    signalfd_siginfo si;
    while (signals_->next(si)) {
      if (si.ssi_signo == SIGHUP) rec_.hangup = true;
      rec_.signal = static_cast<int>(si.ssi_signo);
      if (!launch_) {
        stop = true;  // attach mode and -a: Ctrl-C ends the recording, the processes run on untouched
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
        if (child_) reap(pids_[i]);
      }
    }
    if (child_ && child_exited_) stop = true;  // the command's end (launch, -a -- COMMAND)
    if (cut && !stop) {
      if (!cut_window(now)) stop = true;
      // Behind (a slow cut on a loaded machine: the first reads kallsyms): the next window is a whole one,
      // not a burst of short ones.
      const uint64_t after = now_ns(CLOCK_MONOTONIC);
      next_cut = next_cut + window_ns > after ? next_cut + window_ns : after + window_ns;
    }
    if (!launch_ && !system_ && std::all_of(exited.begin(), exited.end(), [](bool e) { return e; }))
      stop = true;
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
    rec_.exit_status = perf::exit_status_of(st);
    rec_.stats.program_cpu_ms = cpu_ms(ru);
  }
  child_exited_ = true;
}

// Drain: stop the events, then read what they wrote before they stopped, so the end of the program is in.
Status Session::drain() {
  for (UniqueFd& fd : fds_) ioctl(fd.get(), PERF_EVENT_IOC_DISABLE, 0);
  while (read_round(true) > 0) {
  }
  rec_.profile.meta.end_monotonic_ns = now_ns(CLOCK_MONOTONIC);
  return {};
}

}  // namespace fxprof::recorder::internal
