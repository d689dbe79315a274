// fxprof heap shim (heap/shim.cpp): whose code a backtrace's frames are in. Compiled into libfxprof_heap.so
// only.
//
// The shim's own frames are skipped at the top of every stack. Functions the recorder probes with uprobes
// (a Rust #[global_allocator]'s __rust_alloc family: heap/heap.h, OwnAllocator) are named in the environment
// (wire::kProbedEnv): an allocation made inside one of them (a counting allocator that forwards to
// std::alloc::System, i.e. malloc) is counted by the uprobes as the program's call, so the shim leaves it
// out rather than count the block twice. Found on the stack the shim unwinds anyway (every allocation in
// full mode, the sampled ones in sampled mode): nothing more per call.
#pragma once

#include <cstdint>

namespace fxprof::heap::shim {

// Reads where the shim's code is and the probed functions (when this process runs the executable named in
// the environment); once, as the shim resolves its functions. Allocates nothing.
void frames_init();

// The number of frames at the top of `frames` that are the shim's own.
int own_frames(void* const* frames, int n);

// Whether one of `frames` is inside a probed function.
bool inside_probed(void* const* frames, int n);

}  // namespace fxprof::heap::shim
