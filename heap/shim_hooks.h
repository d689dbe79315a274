// fxprof heap shim (heap/shim.cpp): what the wrappers of other allocator families (heap/shim_mimalloc.cpp)
// record through. Compiled into libfxprof_heap.so only.
//
// Allocator libraries call their own exported entry points through the PLT (libmimalloc.so's
// mi_realloc calls mi_heap_realloc, its posix_memalign calls mi_posix_memalign), and the preloaded shim
// comes first in symbol lookup, so those inner calls reach the shim's wrappers too. Each wrapper raises
// `inner_calls` around the call it forwards, and records only when it was the outermost: one allocation
// is counted once, as the call the program made.
#pragma once

#include <cstddef>

namespace fxprof::heap::shim {

// Wrapped calls in progress on this thread (initial-exec TLS: no allocation on first use).
extern thread_local unsigned inner_calls __attribute__((tls_model("initial-exec")));

struct InnerCall {
  InnerCall() { ++inner_calls; }
  ~InnerCall() { --inner_calls; }
  InnerCall(const InnerCall&) = delete;
  InnerCall& operator=(const InnerCall&) = delete;
};

// Whether the shim resolved its functions (false while dlsym runs its first calls): before, forward only.
bool hooks_ready();
// The program allocated `size` bytes at `p` (nullptr: failed), or is about to free `p`; call only when
// inner_calls is 0.
void hook_alloc(void* p, size_t size);
void hook_free(void* p);

}  // namespace fxprof::heap::shim
