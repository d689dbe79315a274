// fxprof base: the signals that stop fxprof, as one set each, so that every place that blocks, waits for or
// resets them agrees.
#pragma once

#include <signal.h>

namespace fxprof {

// SIGINT and SIGTERM: Ctrl+C and kill, what stops serving.
sigset_t stop_signals();

// stop_signals() and SIGHUP: what ends a recording or a count, which record() and stat block and read from a
// signalfd and fxprof holds while it writes the profile (a closed terminal must not lose the recording, nor
// leave the program unwatched).
sigset_t recording_signals();

}  // namespace fxprof
