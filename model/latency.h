// fxprof model: latency weighting, as `perf report --latency` (Linux 6.15) does: a sample counts
// 1/(threads of the recording running at its moment), so that the serial parts of a parallel program stand
// out (its samples add up to the wall time the program ran, not to its CPU time).
//
// Kept as whole samples, so that every sink (report, folded, pprof, SVG) reads the result unchanged: each
// thread keeps its on-CPU samples in proportion to their weight (error diffusion in time order: of a stretch
// where k threads ran, every k-th sample), and each kept sample stands for one sampling interval of the
// program's running time. A thread ran over (t - d, t] for its on-CPU sample at t with CPU delta d (the
// interval when unknown, at most four intervals); the threads running at t are those whose runs cover t.
// Off-CPU samples are left as they are. O(n log n) in the samples: a 60 s, 16-thread recording in ~0.1 s.
#pragma once

#include <cstdint>

#include "model/profile.h"

namespace fxprof::model {

struct LatencyStats {
  uint64_t on_cpu = 0, kept = 0;  // on-CPU samples before, and kept
};

// Drops on-CPU samples of every (recorded) thread so that the rest weigh as above.
LatencyStats keep_latency_samples(Profile& p);

}  // namespace fxprof::model
