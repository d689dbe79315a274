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
//   5. "critical path": the "critical path of T" tracks the Gecko writer adds (model/critical_path.h).
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
};

struct Outcome {
  SymbolicateStats named;                          // "symbols" (Baked), or the lock stacks' (Lazy)
  std::vector<model::SyntheticThread> tracks;      // "critical path", for gecko::write_gecko_profile
  std::vector<std::pair<const char*, double>> ms;  // each pass run and its wall time, for -v
};

// Runs the list on `profile`, in order, each pass that `options` asks for.
Outcome run(model::Profile& profile, const Options& options);

// The "symbols" and "locks" passes of a Baked run, for a profile that ran Lazy (its file written with
// addresses) and now wants names: the terminal's top functions, an upload. Idempotent.
SymbolicateStats name_frames(model::Profile& profile, symbolizer::Symbolizer& symbols);

}  // namespace fxprof::passes
