// fxprof passes: which kernel time was a kernel thread's, an interrupt's or a softirq's (the "kernel
// time" pass of passes.h).
//
// `record -a` samples the whole machine; its kernel time is of three kinds a user tells apart: work done
// for a program (a system call, a page fault: Category::Kernel), work of the kernel's own threads (kworker,
// ksoftirqd, kswapd: KernelThread) and work done for a device or a deferred network/timer job on whatever
// task the interrupt hit (Irq, Softirq). The CPU graphs colour frames by their category, the pprof
// export labels such samples with it (Pyroscope can filter by it), and `record -a` says each kind's share.
//
// The kind follows from the stack, read root to leaf: a sample of a process the recorder marked
// `kernel_threads` starts as KernelThread; a frame that enters a hard interrupt (asm_common_interrupt,
// sysvec_*) makes it and the frames above it Irq; one that runs softirqs (handle_softirqs, __do_softirq,
// do_softirq, run_ksoftirqd) makes them Softirq. User frames keep their category. A frame's category is
// part of its identity in the model, so a stack is interned again with the new frames (once per stack,
// memoised). Kernel frames must be named first (the recorder names them from kallsyms at its end): a
// profile without kernel names is left as it is. Idempotent, so a profile read back runs it again safely.
#pragma once

#include <cstdint>

#include "model/profile.h"

namespace fxprof::passes {

struct KernelTimeShares {
  uint64_t samples = 0;                              // on-CPU samples
  uint64_t kernel_thread = 0, irq = 0, softirq = 0;  // of them, by their leaf's category
};

// Recategorises the kernel frames of every sample's stack as above.
void categorize_kernel_time(model::Profile& profile);

// The on-CPU samples by their leaf frame's kind (after categorize_kernel_time).
KernelTimeShares kernel_time_shares(const model::Profile& profile);

}  // namespace fxprof::passes
