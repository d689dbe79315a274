// fxprof passes: the off-CPU passes that need names, run after symbolication (passes/symbolicate.h):
// futex waits classified by the functions that waited (a lock, a condition variable, a join), the function
// that held each lock (the Wakeup marker's stack), and the terminal's lock-wait line. The recorder made the
// markers (recorder/offcpu.h says why a thread was off the CPU); names come from the symbolizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "model/profile.h"

namespace fxprof::passes {

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
// JoinHandle::join) a Join, of a semaphore's wait (sem_wait; CPython's locks, PyThread_acquire_lock: its
// Lock, Condition.wait, queue.get and Thread.join all wait on one) a Semaphore. A Semaphore that the waker
// (`waker`: its stack at the wake, if any) posted as its thread exited (CPython's release_sentinel) is a
// Join. Unknown (none of them, or unnamed frames only): a lock, as before names.
enum class FutexWait : uint8_t { Unknown, Lock, Condition, Join, Semaphore };
FutexWait classify_futex_wait(const model::Profile& profile, model::StackId stack,
                              model::StackId waker = model::kNoStack);

// After symbolication: each `Lock wait` marker whose stack is a condition variable's wait, a join or a
// semaphore's wait becomes a `Blocked` marker with reason "condition variable", "join" or "semaphore" (no
// lock address), so that idle pool workers and joins are no lock contention: not in lock_wait_summary,
// add_lock_holders or the "Threads waiting" counters, which are made again (add_waiting_counters) when any
// marker changed; the `Wakeup`s that ended them lose their lock address too. Idempotent; add_lock_holders
// calls it first. `classify_of` replaces classify_futex_wait(profile, stack, waker stack)
// (add_lock_holders_unsymbolicated's answers, from the few stacks it names).
void classify_futex_waits(
    model::Profile& profile,
    const std::function<FutexWait(model::StackId wait, model::StackId waker)>& classify_of = {});

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

}  // namespace fxprof::passes
