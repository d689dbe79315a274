#include "base/signals.h"

#include <unistd.h>

namespace fxprof {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

sigset_t recording_signals() {
  sigset_t set = stop_signals();
  sigaddset(&set, SIGHUP);
  return set;
}

SignalsBlocked::SignalsBlocked(Pending at_end) : set_(recording_signals()), at_end_(at_end) {
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
}

bool SignalsBlocked::pending() const {
  sigset_t p;
  sigpending(&p);
  for (int sig = 1; sig < NSIG; ++sig)
    if (sigismember(&set_, sig) == 1 && sigismember(&p, sig) == 1) return true;
  return false;
}

void SignalsBlocked::release() {
  if (released_) return;
  released_ = true;
  timespec zero{};
  while (at_end_ == Pending::Drop && sigtimedwait(&set_, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

SignalReader::SignalReader() {
  const sigset_t set = recording_signals();
  fd_.reset(signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
}

bool SignalReader::next(signalfd_siginfo& si) {
  return fd_.valid() && read(fd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si);
}

}  // namespace fxprof
