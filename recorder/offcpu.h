// fxprof recorder internals: why a thread was off the CPU, from the kernel frames of the stack it left with.
//
// The context-switches event samples the outgoing thread at each switch-out; the top of its kernel
// callchain is the scheduler (__schedule, schedule) and below it the code that decided to wait. Kernel frames
// are named from /proc/kallsyms only at the end of a recording (kallsyms.h), so reasons are given then, once
// per distinct stack. Preemption is not read from the stack: the switch-out record says the task was still
// runnable (PERF_RECORD_MISC_SWITCH_OUT_PREEMPT).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "model/profile.h"

namespace fxprof::recorder {

enum class BlockReason : uint8_t {
  Unknown,    // no kernel frames (no stack, or kallsyms hides addresses), or a wait we do not classify
  Futex,      // futex_wait*: mutexes, condition variables, joins, Rust std::sync, C++ std::mutex
  Io,         // pipe_read, wait_woken, io_schedule, poll/select/epoll, sockets, terminals: waiting for data
  Sleep,      // do_nanosleep, hrtimer_nanosleep: nanosleep, clock_nanosleep, usleep, sleep
  PageFault,  // handle_mm_fault, do_user_addr_fault: a fault that waited (reading a page in, a page lock)
  Preempted,  // switched out while still runnable (time slice over, a higher-priority task woke)
  Signal,     // sigsuspend, pause, sigtimedwait, sigwait: waiting for a signal
};

// The reason for a stack whose kernel function names are `names` (any order; unnamed frames left out).
// A page fault wins over everything (a fault inside read() waits for the page, not the pipe), then futex,
// sleep, I/O.
BlockReason classify_kernel_frames(std::span<const std::string_view> names);

// The model's reason (model::Wait) for a kernel-stack reason.
model::WaitReason wait_reason(BlockReason r);

// The leaf frame of off-CPU samples: "[blocked: futex]", "[blocked: I/O]", "[blocked: sleep]",
// "[blocked: page fault]", "[blocked: signal]", "[preempted]", "[blocked]".
std::string_view reason_label(BlockReason r);
// The marker's `reason` field: "futex", "I/O", "sleep", "page fault", "signal", "preempted", "unknown".
std::string_view reason_text(BlockReason r);

}  // namespace fxprof::recorder
