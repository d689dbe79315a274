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
};

// The reason for a stack whose kernel function names are `names` (any order; unnamed frames left out).
// A page fault wins over everything (a fault inside read() waits for the page, not the pipe), then futex,
// sleep, I/O.
BlockReason classify_kernel_frames(std::span<const std::string_view> names);

// The leaf frame of off-CPU samples: "[blocked: futex]", "[blocked: I/O]", "[blocked: sleep]",
// "[blocked: page fault]", "[preempted]", "[blocked]".
std::string_view reason_label(BlockReason r);
// The marker's `reason` field: "futex", "I/O", "sleep", "page fault", "preempted", "unknown".
std::string_view reason_text(BlockReason r);

// "0x55d8... 383.2 ms in 141 waits by 4 threads held by worker_update, 0x7f2e... 99.2 ms in 1 wait by 1
// thread": the `n` locks whose `Lock wait` markers add up to the most time, over every thread of every
// process, with the (at most two) functions that held each lock most often (the markers' `holder` fields,
// add_lock_holders); "" without any.
std::string lock_wait_summary(const model::Profile& profile, size_t n);

// Whether a frame belongs to the code that takes and releases locks rather than to the program holding them:
// the C library and the dynamic loader (`binary` libc.so*, libpthread*, ld-linux*), and functions of lock
// implementations linked into the program (Rust's std::sys and std::sync, futex wrappers).
bool is_lock_plumbing(std::string_view binary, std::string_view function);

// The function that held a lock: the first named frame, leaf first, of the (symbolicated) stack of the
// `Wakeup` that released it, outside is_lock_plumbing; "" when a frame on the way has no name (not
// symbolicated) or all are plumbing.
std::string_view lock_holder(const model::Profile& profile, model::StackId stack);

// What a futex wait waited for, from the (symbolicated) user frames of its stack, leaf first: the first
// frame of lock code (a mutex's or rwlock's lock: also a condition variable's re-lock after its wake) makes
// it a Lock, of a condition variable's wait a Condition, of a thread join (pthread_join, Rust's
// JoinHandle::join) a Join. Unknown (none of them, or unnamed frames only): a lock, as before names.
enum class FutexWait : uint8_t { Unknown, Lock, Condition, Join };
FutexWait classify_futex_wait(const model::Profile& profile, model::StackId stack);

// After symbolication: each `Lock wait` marker whose stack is a condition variable's wait or a join becomes
// a `Blocked` marker with reason "condition variable" or "join" (no lock address), so that idle pool
// workers and joins are no lock contention: not in lock_wait_summary, add_lock_holders or the "Threads
// waiting" counters, which are made again (add_waiting_counters) when any marker changed; the `Wakeup`s that
// ended them lose their lock address too. Idempotent; add_lock_holders calls it first. `classify_of`
// replaces classify_futex_wait(profile, stack) (add_lock_holders_unsymbolicated's answers, from the few
// wait stacks it names).
void classify_futex_waits(model::Profile& profile,
                          const std::function<FutexWait(model::StackId)>& classify_of = {});

// After symbolication: each `Lock wait` marker woken by a thread whose `Wakeup` marker (the recorder's eBPF
// waker tracer, futex wakes) has a stack gets a `holder` field, the lock_holder() of that stack (the
// function that released the lock). Idempotent; lock_wait_summary names the holders from these fields.
// `holder_of` replaces lock_holder(profile, stack) (add_lock_holders_unsymbolicated's names).
void add_lock_holders(model::Profile& profile,
                      const std::function<std::string(model::StackId)>& holder_of = {});

// The same for a profile that stays unsymbolicated (the served, lazy profile of `fxprof record`): only the
// few Wakeup and Lock wait stacks are named, in a profile of their own that `symbolicate` names (the
// caller's symbolizer), so the waits are classified (classify_futex_waits) and their holders named, and the
// frames of `profile` stay raw addresses.
void add_lock_holders_unsymbolicated(model::Profile& profile,
                                     const std::function<void(model::Profile&)>& symbolicate);

// The "Threads waiting" counter of each process with `Lock wait` markers: per sampling interval (a grid of
// `interval_ns` from the process start), how many of its threads waited on a lock (futex) during any part
// of it. Cells are written only around waits (a zero before and after each run of busy cells), so a long
// idle recording costs nothing; the grid is regular where it matters because the front end draws a
// counter of an unknown category as count per time (Gecko `count`, a line-rate graph, tooltip the count).
void add_waiting_counters(model::Profile& profile, uint64_t interval_ns);

}  // namespace fxprof::recorder
