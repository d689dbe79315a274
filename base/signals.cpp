#include "base/signals.h"

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

}  // namespace fxprof
