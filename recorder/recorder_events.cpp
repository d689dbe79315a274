// The recorder's perf events (session.h): the probe that picks the event (PMU, paranoid level, off-CPU
// rights), one event per CPU on each target with its ring buffer, and the errors for refused ones.
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "counters/events.h"
#include "recorder/perf.h"
#include "recorder/session.h"

namespace fxprof::recorder::internal {

namespace {

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

}  // namespace

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
    // 2, and 3 on kernels without Debian's patch that refuses everything there (upstream treats 3 as 2, as
    // perf record does): user space only. Where 3 refuses that too, permission_error says so.
    if ((err == EACCES || err == EPERM) && !cfg_.exclude_kernel && !root_ && paranoid_ >= 2) {
      cfg_.exclude_kernel = true;
      tried_user_only = true;
      notice("kernel.perf_event_paranoid=" + std::to_string(paranoid_) +
             " lets ordinary users sample only the user space of their own processes: recording without "
             "kernel frames (for kernel stacks: `sudo sysctl kernel.perf_event_paranoid=1` or run as root)");
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

}  // namespace fxprof::recorder::internal
