// The wakers tracker (wakes.h): who woke each off-CPU wait, and the waker's stack at a futex wake as a
// Wakeup marker on its thread.
#include "recorder/wakes.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <utility>

#include "model/waits.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

void WakeTracker::on_wakings(std::span<Waking> w) {
  for (Waking& k : w) {
    wakes_.push_back({k.time, k.waker_pid, k.waker_tid, k.wakee_tid, k.flags, k.uaddr, model::kNoStack});
    if (!k.stack.empty() && c_.unwinder) pending_.emplace_back(wakes_.size() - 1, std::move(k));
  }
  c_.counts.wakes = wakes_.size();
}

void WakeTracker::on_waking(Waking& w, model::StackId waker_stack) {
  on_wakings(std::span<Waking>(&w, 1));
  if (waker_stack == model::kNoStack) return;
  wakes_.back().stack = waker_stack;
  ++c_.counts.waker_stacks;
}

// Whether the waker's stack of a wake may still be used: only a wait with a marker gets a Wakeup marker
// (name_wakers), so a wake whose wakee's span ended shorter than the marker threshold needs none (at high
// switch rates, most). Open: the wakee is still out in the span the wake ends, it may become a marker.
WakeTracker::Need WakeTracker::need(const Wake& w) const {
  const model::Thread* t = c_.thread_of(w.wakee_tid);
  if (!t) return Need::Yes;  // gone or not seen yet: keep it to be safe
  // Interned already when off-CPU spans are recorded (the builder's off-CPU part): no new string.
  const model::StringId off_type = c_.off_cpu ? c_.profile.strings.intern("OffCpu") : model::kNoString;
  // Markers are appended as spans end, in time order: the ones that could contain the wake are at the back.
  for (auto m = t->markers.rbegin(); m != t->markers.rend(); ++m) {
    if (m->type != off_type) continue;
    if (m->end_ns < w.time) break;
    if (m->start_ns <= w.time + kWakeBeforeSwitchNs) return Need::Yes;
  }
  const std::optional<uint64_t> out = c_.out_since(w.wakee_tid);
  return out && *out <= w.time + kWakeBeforeSwitchNs ? Need::Open : Need::No;
}

// The waker's user stack at its futex system call, unwound like a CPU sample's (no kernel part: the tracer
// sends user registers only). The leaf is the address after the `syscall` instruction. A function a tail
// call took off the stack is put back (Unwinder::tail_called): the holder of a lock it unlocked last.
void WakeTracker::resolve(uint32_t pid, uint64_t before_ns) {
  model::Profile& profile = c_.profile;
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    auto& [index, k] = pending_[i];
    const bool now = pid == 0 || (k.waker_pid == pid && k.time < before_ns);
    const Need n = need(wakes_[index]);
    if (n == Need::No) continue;
    if (!now || (n == Need::Open && pid == 0)) {  // later: a later round may need it
      if (kept != i) pending_[kept] = std::move(pending_[i]);
      ++kept;
      continue;
    }
    UnwindResult u = c_.unwinder->unwind(k.waker_pid, k.regs, k.stack, unwound_);
    if (u.count == 0) continue;
    path_.clear();
    if (u.end != UnwindEnd::Complete) path_.push_back(profile.label_frame("(stack truncated)"));
    for (size_t f = u.count; f-- > 0;) {
      path_.push_back(profile.native_frame(unwound_[f]));
      // The function whose tail call replaced its frame (a holder's `jmp pthread_mutex_unlock`): put back,
      // stored at its entry + 1 for every reader's - 1, as the function the call at unwound_[f] called.
      if (f > 0)
        if (auto called = c_.unwinder->tail_called(k.waker_pid, unwound_[f],
                                                   f - 1 == 0 ? unwound_[0] : unwound_[f - 1] - 1))
          path_.push_back(profile.native_frame(*called + 1));
    }
    wakes_[index].stack = profile.stacks.intern_path(path_);
    ++c_.counts.waker_stacks;
  }
  pending_.resize(kept);
}

// The waits still open at the end were closed (the off-CPU spans tracker's on_end): none is open now.
void WakeTracker::finish() {
  resolve(0, 0);
  pending_.clear();
  if (c_.off_cpu && !wakes_.empty()) name_wakers();
}

// Each off-CPU marker that is not a preemption gets the last wakeup of its thread within its span: "NAME TID"
// of the waker. A wakeup with the waker's stack also becomes a `Wakeup` marker on the waker's thread: whom
// it woke, the lock (the futex word it woke, for a `Lock wait`), and the stack that released it.
void WakeTracker::name_wakers() {
  model::Profile& profile = c_.profile;
  // Interned by the builder's off-CPU part with the marker schemas (c_.off_cpu): the same ids, no new string.
  const model::StringId wakeup_name = profile.strings.intern("Wakeup"),
                        wakee_key = profile.strings.intern("wakee"),
                        lock_key = profile.strings.intern("lock");
  std::sort(wakes_.begin(), wakes_.end(), [](const Wake& a, const Wake& b) {
    return a.wakee_tid != b.wakee_tid ? a.wakee_tid < b.wakee_tid : a.time < b.time;
  });
  // Threads by tid (a tid may be reused: the one alive at the time is meant).
  std::unordered_multimap<uint32_t, std::pair<model::Process*, model::Thread*>> by_tid;
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads) by_tid.emplace(t.tid, std::make_pair(&proc, &t));
  auto thread_at = [&](uint32_t tid, uint64_t time) -> std::pair<model::Process*, model::Thread*> {
    std::pair<model::Process*, model::Thread*> found{}, any{};
    for (auto [it, end] = by_tid.equal_range(tid); it != end; ++it) {
      any = it->second;
      const model::Thread& th = *it->second.second;
      if (th.start_ns <= time && (!th.end_ns || time <= *th.end_ns)) found = it->second;
    }
    return found.second ? found : any;
  };
  std::vector<std::pair<model::Thread*, model::Marker>> wakeups;
  char buf[64];
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads) {
      uint64_t back_ns = 0;  // the end of the thread's previous off-CPU span: it ran from then on
      for (model::Wait& wait : t.waits) {
        const uint64_t previous_end = std::exchange(back_ns, wait.end_ns);
        if (wait.reason == model::WaitReason::Preempted) continue;
        // The last wakeup of this thread at or before the end of the span, if it is within the span or just
        // before it (kWakeBeforeSwitchNs) while the thread still ran.
        auto it = std::upper_bound(wakes_.begin(), wakes_.end(), std::make_pair(t.tid, wait.end_ns),
                                   [](const std::pair<uint32_t, uint64_t>& key, const Wake& w) {
                                     return key.first != w.wakee_tid ? key.first < w.wakee_tid
                                                                     : key.second < w.time;
                                   });
        if (it == wakes_.begin()) continue;
        --it;
        if (it->wakee_tid != t.tid) continue;
        if (it->time < wait.start_ns &&
            (wait.start_ns - it->time > kWakeBeforeSwitchNs || it->time <= previous_end))
          continue;
        const auto [waker_proc, waker] =
            it->flags ? std::pair<model::Process*, model::Thread*>{} : thread_at(it->waker_tid, it->time);
        wait.wake_ns =
            std::clamp(it->time, wait.start_ns, wait.end_ns);  // stamped before the switch-out: its start
        // Only a thread waker has a tid; an untraced one its pid; the task an interrupt hit is no waker (the
        // Gecko markers say no more, so a profile read back has the same waits).
        if (it->flags & kWakeInterrupt) {  // a sleep's end is its timer
          wait.waker =
              wait.reason == model::WaitReason::Sleep ? model::Waker::Timer : model::Waker::Interrupt;
        } else if (it->flags & kWakeUntraced) {
          wait.waker = model::Waker::Untraced;
          wait.waker_pid = it->waker_pid;
        } else {
          wait.waker = model::Waker::Thread;
          wait.waker_pid = it->waker_pid;
          wait.waker_tid = it->waker_tid;
        }
        if (wait.waker == model::Waker::Thread)
          wait.waker_name = profile.strings.intern(waker ? std::string_view(waker->name) : "thread");
        if (it->stack != model::kNoStack && waker) wait.waker_stack = it->stack;
        model::make_wait_marker(profile, t, wait);
        if (wait.waker_stack == model::kNoStack) continue;
        // The waker's side: a `Wakeup` marker on its thread, with whom it woke, the lock, the stack.
        model::Marker w;
        w.name = wakeup_name;
        w.start_ns = it->time;
        w.phase = model::MarkerPhase::Instant;
        w.type = wakeup_name;
        w.stack = it->stack;
        std::snprintf(buf, sizeof buf, "%.40s %u", t.name.c_str(), t.tid);
        w.fields.push_back({wakee_key, true, 0, profile.strings.intern(buf)});
        if (wait.reason == model::WaitReason::Futex && wait.lock && it->uaddr) {  // the futex word it woke
          std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(it->uaddr));
          w.fields.push_back({lock_key, true, 0, profile.strings.intern(buf)});
        }
        wakeups.emplace_back(waker, std::move(w));
      }
    }
  // Appended after the walk: a waker's markers may be the ones being walked.
  for (auto& [thread, w] : wakeups) thread->markers.push_back(std::move(w));
}

}  // namespace fxprof::recorder
