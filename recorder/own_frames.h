// fxprof recorder internals: fxprof's own work inside the profiled processes, marked as fxprof's.
//
// With --heap, libfxprof_heap.so runs inside the program (LD_PRELOAD): a sampled allocation unwinds its
// stack with libunwind and writes to a pipe, which blocks when fxprof reads behind. Those samples (13% of a
// program's in one test, 3% in libunwind) are fxprof's cost, not the program's code: each stack that goes
// through the shim gets the label frame model::kHeapShimLabel over the shim's outermost frame, so the call
// tree shows `caller -> fxprof heap shim -> malloc -> ...`, and the top-functions line leaves them out.
// The allocator the shim calls is not fxprof's work: a stack whose one shim frame (the entry: malloc,
// free...) calls out of the shim (into glibc's malloc) stays the program's, `caller -> malloc (shim) ->
// malloc (libc)`; the label goes where the shim itself runs (the leaf in the shim, or a second shim frame:
// the sampling, its stack walk and its pipe write).
#pragma once

#include "model/profile.h"

namespace fxprof::recorder {

// Rewrites the stacks of samples and markers that have a frame in a mapping of libfxprof_heap.so (native
// frames with absolute addresses, as the recorder makes them): the label goes right over the outermost such
// frame. Processes without the shim are untouched. Returns the samples marked.
uint64_t mark_heap_shim_frames(model::Profile& profile);

}  // namespace fxprof::recorder
