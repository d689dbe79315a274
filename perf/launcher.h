// fxprof perf layer: starts the program to profile or count suspended, so that perf events can be attached
// to it before it runs a single instruction of its own (`record` and `stat` alike), and reaps one left
// running.
//
// fork(); the child blocks reading a CLOEXEC "resume" pipe; the parent opens the perf events on the child's
// pid (enable_on_exec, so nothing before execve is sampled) and then writes one byte. The child restores the
// caller's signal mask and calls execvp; if that fails it writes errno to a second CLOEXEC pipe, which the
// parent reads (EOF there means the exec succeeded). Cost: one fork and two pipes, well under a millisecond.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace fxprof::perf {

class SuspendedChild {
 public:
  // Forks; the child waits for resume(). `child_mask` is the signal mask the program should start with;
  // `nofile`, when given, its open-files limit (the caller's own, before fxprof raised it for its events).
  static Result<SuspendedChild> spawn(const std::vector<std::string>& argv, const sigset_t& child_mask,
                                      std::optional<rlimit> nofile = std::nullopt);
  SuspendedChild(SuspendedChild&& o) noexcept;
  SuspendedChild& operator=(SuspendedChild&&) = delete;
  // A child never resumed exits without running the program (and is reaped here).
  ~SuspendedChild();

  pid_t pid() const { return pid_; }
  // Lets the child exec. Returns the exec error (exit code 127) if the program could not be run; the child
  // is then reaped.
  Status resume();

 private:
  SuspendedChild() = default;
  pid_t pid_ = -1;
  std::string name_;
  UniqueFd resume_w_;
  UniqueFd error_r_;
  bool resumed_ = false;
};

// The exit status a shell gives a child with this wait status: its exit code, 128 + the signal that
// killed it, else 1.
int exit_status_of(int wait_status);

// A launched program still running when the recording ended (--duration): reaped by a thread of its own
// when it exits, so that it is no zombie while fxprof goes on serving. The destructor stops waiting (the
// program may run on after fxprof); it does not kill it.
class ChildReaper {
 public:
  explicit ChildReaper(pid_t pid);
  ~ChildReaper();
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

 private:
  UniqueFd stop_;  // an eventfd: written by the destructor
  std::thread thread_;
};

}  // namespace fxprof::perf
