// The recorder's system-wide mode (`record -a`, recorder.h Options::system_wide): one CPU event (and
// off-CPU's context-switches event) per CPU for every task (pid -1); the processes running at the start are
// attached from /proc as -p attaches them (names, threads, libraries from /proc/PID/maps), those that start
// later come from the FORK, COMM and MMAP2 records every CPU event writes. Kernel threads and the idle task
// are the builder's (system_tasks.h).
//
// Memory: a process that ended keeps nothing beyond its part of the profile: the unwinder forgets its
// mappings at its last thread's exit (libraries.h), the task tracker keeps one small entry per pid (reused
// pids overwrite it), and threads without a sample or marker are dropped at the end (prune_idle_tasks).
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "recorder/quality.h"
#include "recorder/session.h"

namespace fxprof::recorder::internal {

// Start (-a): the events first, then /proc, so that nothing that starts meanwhile is missed; the command,
// if any, last (it runs unfollowed: the CPU events see it like any other program).
Status Session::start_system() {
  if (!root_ && paranoid_ > 0)
    return Err("record -a needs root or kernel.perf_event_paranoid <= 0 (it is " + std::to_string(paranoid_) +
               "): run fxprof with sudo, or `sudo sysctl kernel.perf_event_paranoid=0`");
  if (!opt_.command.empty()) {
    auto c = perf::SuspendedChild::spawn(opt_.command, signals_->old_mask());
    if (!c) return std::move(c).take_error();
    child_.emplace(std::move(*c));
    pids_.push_back(child_->pid());
  }
  if (auto s = prepare_builder(); !s) return s;
  model::Profile& prof = rec_.profile;
  std::string cmdline = "-a";
  for (const std::string& a : opt_.command) cmdline += " " + a;
  prof.meta.product = "fxprof: all processes";
  prof.meta.machine.command_line = cmdline;
  if (auto s = open_target(-1, true); !s) return s;
  // Events run from here on: what /proc says now, and every record after, describe every task.
  for (uint32_t pid : procfs_->list("/proc"))
    if (pid != 0) sink_->on_attached(pid, start_ns_);
  trace_new_pids();
  if (child_) {
    if (auto s = child_->resume(); !s) return s;
    builder_->keep_executable(static_cast<uint32_t>(child_->pid()));
    pidfds_.emplace_back(static_cast<int>(syscall(SYS_pidfd_open, child_->pid(), 0)));
  }
  return {};
}

// The threads of the machine that neither ran nor waited while it recorded (most of them, on an idle
// machine) are not tracks; a process left without threads is not one either.
void Session::prune_idle_tasks() {
  std::vector<model::Process>& procs = rec_.profile.processes;
  for (model::Process& p : procs)
    std::erase_if(p.threads, [](const model::Thread& t) {
      return t.samples.empty() && t.markers.empty() && t.allocations.empty();
    });
  std::erase_if(procs, [](const model::Process& p) { return p.threads.empty(); });
}

// The data-quality lines of -a: records lost per CPU (whose buffer overflowed) and the processes whose
// libraries could not be read at the start.
void Session::system_quality(std::vector<QualityProblem>& problems) {
  const std::map<uint32_t, uint64_t>& lost = builder_->lost_by_cpu();
  if (!lost.empty()) {
    std::string per;
    uint64_t total = 0;
    for (const auto& [cpu, n] : lost) {
      per += (per.empty() ? "" : ", ") + std::string("CPU ") + std::to_string(cpu) + ": " + std::to_string(n);
      total += n;
    }
    problems.push_back({"Records lost per CPU: " + per, total, "records lost per CPU: " + per});
  }
  const std::vector<std::string>& unreadable = builder_->unreadable_maps();
  if (!unreadable.empty()) {
    std::string names;
    for (size_t i = 0; i < unreadable.size() && i < 5; ++i) names += (i ? ", " : "") + unreadable[i];
    if (unreadable.size() > 5) names += " and " + std::to_string(unreadable.size() - 5) + " more";
    problems.push_back({"Libraries unreadable at the start: " + names, unreadable.size(),
                        std::to_string(unreadable.size()) + " process(es) running at the start had an " +
                            "unreadable /proc/PID/maps (" + names +
                            "): their libraries mapped before the recording are unnamed"});
  }
}

}  // namespace fxprof::recorder::internal
