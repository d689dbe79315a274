// fxprof passes: what runs on a profile once every source of it has finished, as one ordered list
// (passes.cpp), the same for every command that makes or reads a profile: `record` (after the recorder, the
// heap pipe and the USDT probes), `import` (a perf.data or pprof file), `load`, `symbolicate`, the sinks'
// input (report, export, diff) and the agent's windows. In order:
//   1. "jit names": JIT frames named by the code at their address at their time (model::name_jit_frames),
//      over every stack of the model: CPU samples, markers and the heap's allocation rows alike (they used to
//      be named by the recorder before the heap's rows existed: node --heap=full kept raw addresses).
//   2. "kernel time": kernel frames of kernel threads, hard interrupts and softirqs given categories of
//      their own (kernel_time.h); the recorder named the kernel frames already.
//   3. "symbols": every frame named by the symbolizer (symbolicate.h), for a baked profile.
//   4. "locks": futex waits classified, each lock's holder named (locks.h); a profile served with raw
//      addresses gets them from its few Wakeup and Lock wait stacks named apart (lock_holders.cpp).
//   5. "source tracks": threads a source made for the front end only (perf.data's other events,
//      recorder/perf_import.h) leave the model for the Gecko writer's tracks, their stacks named as the rest.
//   6. "critical path": the "critical path of T" tracks the Gecko writer adds (model/critical_path.h).
// A new pass is a function and a row there. Sources stop at the model: they name no frame.
#pragma once

#include <utility>
#include <vector>

#include "model/critical_path.h"
#include "model/profile.h"
#include "passes/symbolicate.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::passes {

enum class Naming : uint8_t {
  Raw,    // no symbolizer: frames stay as the source made them (JIT frames are still named)
  Lazy,   // the file keeps addresses for the front end to name: only the lock passes' stacks are named
  Baked,  // every frame named
};

struct Options {
  symbolizer::Symbolizer* symbols = nullptr;  // Lazy and Baked need one
  Naming naming = Naming::Raw;
  bool tracks = true;  // make the critical-path tracks (only the Gecko writer wants them)
  // (process, thread) indices of threads the source made for the front end only, each after its process's
  // recorded threads: moved into Outcome::tracks (as model::SyntheticThread), out of the model.
  std::vector<std::pair<size_t, size_t>> source_tracks;
};

struct Outcome {
  SymbolicateStats named;                          // "symbols" (Baked), or the lock stacks' (Lazy)
  std::vector<model::SyntheticThread> tracks;      // "source tracks", "critical path": for the Gecko writer
  std::vector<std::pair<const char*, double>> ms;  // each pass run and its wall time, for -v
};

// Runs the list on `profile`, in order, each pass that `options` asks for.
Outcome run(model::Profile& profile, const Options& options);

// The tracks a Gecko file was written with and its reader kept (gecko::ReadInfo::keep_tracks: perf.data's
// other events, the critical-path tracks), put back after their processes' threads so that a run renames
// their frames too, and `o` made to take them out again (source_tracks) instead of making the critical-path
// tracks anew (they are among them): for a profile read and written again (`load`'s copy, `symbolicate`).
Options with_tracks(model::Profile& profile, std::vector<std::pair<size_t, model::Thread>>& kept, Options o);

// The "symbols" and "locks" passes of a Baked run, for a profile that ran Lazy (its file written with
// addresses) and now wants names: the terminal's top functions, an upload. Idempotent.
SymbolicateStats name_frames(model::Profile& profile, symbolizer::Symbolizer& symbols);

}  // namespace fxprof::passes
