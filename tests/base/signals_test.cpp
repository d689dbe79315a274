// base/signals.h: the two sets of signals that stop fxprof.
#include "base/signals.h"

#include <catch2/catch.hpp>

using namespace fxprof;

TEST_CASE("Ctrl+C and kill stop serving; a closed terminal also ends a recording") {
  const sigset_t stop = stop_signals(), rec = recording_signals();
  for (int sig = 1; sig < NSIG; ++sig) {
    INFO(sig);
    CHECK((sigismember(&stop, sig) == 1) == (sig == SIGINT || sig == SIGTERM));
    CHECK((sigismember(&rec, sig) == 1) == (sig == SIGINT || sig == SIGTERM || sig == SIGHUP));
  }
}
