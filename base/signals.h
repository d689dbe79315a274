// fxprof base: the signals that stop fxprof, as one set each, and the two ways fxprof holds them (blocked, or
// blocked and read from a signalfd), so that every place that blocks, waits for or resets them agrees.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>

#include "base/fd.h"

namespace fxprof {

// SIGINT and SIGTERM: Ctrl+C and kill, what stops serving.
sigset_t stop_signals();

// stop_signals() and SIGHUP: what ends a recording or a count, which record() and stat block and read from a
// signalfd and fxprof holds while it writes the profile (a closed terminal must not lose the recording, nor
// leave the program unwatched).
sigset_t recording_signals();

// Blocks recording_signals() in the calling thread while alive. A thread started inside one inherits the
// mask, so the kernel never delivers these signals to it (their default action would kill fxprof outright)
// and the recording's signalfd gets them. release() (or the destructor) restores the caller's mask; with
// Pending::Drop it first takes what arrived meanwhile (a recording that ended on Ctrl+C must not then die of
// it), with Pending::Keep it leaves it to the caller's mask (an inner block inside an outer one).
class SignalsBlocked {
 public:
  enum class Pending { Keep, Drop };
  explicit SignalsBlocked(Pending at_end = Pending::Keep);
  ~SignalsBlocked() { release(); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

  // The mask before: what a launched program starts with.
  const sigset_t& old_mask() const { return old_; }
  // One of the signals is pending (it came while blocked).
  bool pending() const;
  void release();

 private:
  sigset_t set_, old_;
  Pending at_end_;
  bool released_ = false;
};

// SignalsBlocked (dropping what is left at the end), and the signals read from a signalfd (poll() its fd
// beside the recording's other fds).
class SignalReader {
 public:
  SignalReader();
  const sigset_t& old_mask() const { return blocked_.old_mask(); }
  int fd() const { return fd_.get(); }
  // Reads one pending signal; false when none.
  bool next(signalfd_siginfo& si);
  // Sent with kill(2) or sigqueue(2) by a process (to fxprof alone), not by the terminal.
  static bool from_user(const signalfd_siginfo& si) {
    return si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE;
  }

 private:
  SignalsBlocked blocked_{
      SignalsBlocked::Pending::Drop};  // declared first: the fd closes before the mask comes back
  UniqueFd fd_;
};

}  // namespace fxprof
