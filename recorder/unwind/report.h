// The line fxprof prints after recording when stacks stopped short, so that failures are never silent: when
// more than 5 % of some thread's stacks (of at least 20) end incomplete, one line names the binaries where
// walks stopped and the likely remedy. Pure functions of counts, so tests pin the wording.
//
// Design: the per-thread share is taken from the finished profile (stacks marked "(stack truncated)" after
// the frame-pointer splice: what the user will see), the culprits from the unwinder's per-binary stop
// counts (where the walk could not go on). A walk that runs out of copied stack is cured by a larger
// --stack-size; one that finds no rule by .eh_frame (the compiler's default unwind tables) or frame
// pointers (--call-graph fp). 5 %: below that, a thread's call tree is still right to within its noise;
// the issue reports seen were 93-98 % of stacks.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

struct ThreadStacks {
  std::string name;  // thread name
  uint32_t tid = 0;
  uint64_t samples = 0;     // samples with a user stack
  uint64_t incomplete = 0;  // of those, marked truncated
};

// The one line (without "fxprof: " or a newline), or "" when no thread crosses 5 %.
std::string incomplete_stacks_warning(std::span<const ThreadStacks> threads,
                                      std::span<const UnwindStop> stops, uint32_t stack_size);

}  // namespace fxprof::recorder
