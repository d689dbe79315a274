// base/signals.h: the two sets of signals that stop fxprof.
#include "base/signals.h"

#include <pthread.h>

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

TEST_CASE("a signal that came while blocked is pending, dropped at the end with Drop and kept with Keep") {
  SignalsBlocked outer(SignalsBlocked::Pending::Drop);
  {
    SignalsBlocked inner;  // Keep: an inner block leaves what came to the outer one
    raise(SIGHUP);
    CHECK(inner.pending());
  }
  CHECK(outer.pending());  // still blocked by the outer one, still there
  {
    SignalReader reader;  // reads it from its signalfd
    signalfd_siginfo si;
    REQUIRE(reader.next(si));
    CHECK(si.ssi_signo == SIGHUP);
    CHECK_FALSE(reader.next(si));
  }
  raise(SIGTERM);
  CHECK(outer.pending());
  outer.release();  // dropped, not delivered: this test is still alive
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  CHECK(sigismember(&now, SIGTERM) == 0);
}
