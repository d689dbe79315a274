// fxprof model: off-CPU waits as typed facts (model::Wait, per thread like allocations) and the `OffCpu`
// markers made from them.
//
// The recorder fills a thread's waits (recorder/offcpu_spans.h: times, reason, lock address;
// recorder/wakes.h: the waker, its wake time and stack) and makes each wait's marker from it with
// make_wait_marker(); the lock passes (passes/locks.h) change the typed wait and make its marker again. The
// Gecko writer writes the markers as they are; the Gecko reader reads the waits back from them (read_waits),
// so the passes and the critical path (model/critical_path.h) work alike on a recording and on a saved
// profile, without parsing display text anywhere else.
#pragma once

#include <optional>
#include <string_view>

#include "model/profile.h"

namespace fxprof::model {

// The marker's `reason` field: "futex", "I/O", "sleep", "condition variable", ... ("(pending)" until the
// recorder names kernel frames).
std::string_view wait_reason_text(WaitReason r);
std::optional<WaitReason> wait_reason_from_text(std::string_view text);

// The marker's name: "Preempted", "Lock wait" (a futex wait with a lock address) or "Blocked".
std::string_view wait_marker_name(const Wait& w);

// Sets the name and the payload fields (reason, lock, waker, holder: in that order, each when present; a
// lock wait keeps the lock pass's `waiter`, last) of `t.markers[w.marker]` from `w`.
void make_wait_marker(Profile& p, Thread& t, const Wait& w);

// The waits of every thread from their `OffCpu` and `Wakeup` markers (a profile read from a file): the
// reason, lock and waker ("NAME TID", "timer", "interrupt", "pid N (not recorded)") of each, its holder,
// and from the `Wakeup` marker that ended it the wake time and the waker's stack. Replaces any waits.
void read_waits(Profile& p);

// Calls f(StackId&) on the waker stack of every wait (of any thread) woken by a thread of `proc` (its
// waker_pid): a waker stack is one of the waker's process's stacks, renumbered with them by the passes that
// rewrite a process's stacks (symbolication, JIT names, own frames).
template <class F>
void for_each_waker_stack(Profile& p, const Process& proc, F&& f) {
  for (Process& q : p.processes)
    for (Thread& t : q.threads)
      for (Wait& w : t.waits)
        if (w.waker_stack != kNoStack && w.waker_pid == proc.pid) f(w.waker_stack);
}

}  // namespace fxprof::model
