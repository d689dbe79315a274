// The cut of the recorder's continuous mode (recorder.h Options::window_s, `fxprof agent`), apart from the
// session so that it can be tested with synthetic records (tests/recorder/window_test.cpp).
//
// What the live recording keeps from one window to the next (the agent renews its recording every hour,
// agent/agent.h): the processes and threads alive, with their libraries; for each process that ended, an
// entry (sizeof(model::Process), ~200 bytes: its pid and times; its name, threads, libraries, counters and
// JIT code are freed). The strings, frames and stacks interned during a window are emptied once its samples
// left (ProfileBuilder::forget_interned), except with off-CPU stacks or --per-cpu tracks, whose ids outlive
// a window: then they grow with every distinct stack the recording sees, until it is renewed. The binaries
// that no live process maps any more go at each cut (ProfileBuilder::release_unmapped): the unwinder's
// modules, their mapped files and descriptors (beside a test suite, every program it built stayed mapped
// for the recording's hour: 60-120 MB of the agent's RSS in file pages), and the kept descriptors.
#pragma once

#include <cstdint>
#include <vector>

#include "base/fd.h"
#include "model/profile.h"
#include "recorder/builder.h"

namespace fxprof::recorder {

// Moves the samples of `live` into a profile of their own that holds only the frames, stacks, strings and
// binaries they use (the processes with samples, with their libs; `live`'s meta, from `from_ns` to
// `until_ns`), then empties what the next window does not need: the threads' markers, waits and
// allocations, ended processes' state, the binaries no live process maps (builder.release_unmapped()) and
// the model's interned tables (builder.forget_interned()). The descriptors of mapped files let go are moved
// into `released_files` (the window's libs may be read through them: Lib::read_path), or closed when null.
model::Profile take_window(model::Profile& live, ProfileBuilder& builder, uint64_t from_ns, uint64_t until_ns,
                           std::vector<UniqueFd>* released_files = nullptr);

}  // namespace fxprof::recorder
