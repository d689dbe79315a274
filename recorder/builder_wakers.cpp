// The profile builder's off-CPU wakers (builder.h, recorder/waker.h): who woke each wait, and the waker's
// stack at a futex wake as a Wakeup marker on its thread.
#include <algorithm>
#include <cstdio>

#include "recorder/builder.h"

namespace fxprof::recorder {

void ProfileBuilder::add_wakings(std::span<Waking> w) {
  for (Waking& k : w) {
    wakes_.push_back({k.time, k.waker_pid, k.waker_tid, k.wakee_tid, k.flags, k.uaddr, model::kNoStack});
    std::deque<uint64_t>& times = wake_times_[k.wakee_tid];  // in time order, but for CPUs' races
    times.insert(std::upper_bound(times.begin(), times.end(), k.time), k.time);
    if (!k.stack.empty() && unwinder_) pending_wakes_.emplace_back(wakes_.size() - 1, std::move(k));
  }
}

// Whether the waker's stack of a wake may still be used: only a wait with a marker gets a Wakeup marker
// (name_wakers), so a wake whose wakee's span ended shorter than the marker threshold needs none (at high
// switch rates, most). Open: the wakee is still out in the span the wake ends, it may become a marker.
ProfileBuilder::WakeNeed ProfileBuilder::wake_need(const Wake& w) const {
  auto it = threads_.find(w.wakee_tid);
  if (it == threads_.end()) return WakeNeed::Yes;  // gone or not seen yet: keep it to be safe
  const ThreadRef& th = it->second;
  const model::Thread& t = profile_.processes[th.proc].threads[th.thread];
  // Markers are appended as spans end, in time order: the ones that could contain the wake are at the back.
  for (auto m = t.markers.rbegin(); m != t.markers.rend(); ++m) {
    if (m->type != off_type_) continue;
    if (m->end_ns < w.time) break;
    if (m->start_ns <= w.time) return WakeNeed::Yes;
  }
  return th.off.out && th.off.out_ns <= w.time ? WakeNeed::Open : WakeNeed::No;
}

// The waker's user stack at its futex system call, unwound like a CPU sample's (no kernel part: the tracer
// sends user registers only). The leaf is the address after the `syscall` instruction.
void ProfileBuilder::resolve_wakes(uint32_t pid, uint64_t before_ns) {
  size_t kept = 0;
  for (size_t i = 0; i < pending_wakes_.size(); ++i) {
    auto& [index, k] = pending_wakes_[i];
    const bool now = pid == 0 || (k.waker_pid == pid && k.time < before_ns);
    const WakeNeed need = wake_need(wakes_[index]);
    if (need == WakeNeed::No) continue;
    if (!now || (need == WakeNeed::Open && pid == 0)) {  // later: a later round may need it
      if (kept != i) pending_wakes_[kept] = std::move(pending_wakes_[i]);
      ++kept;
      continue;
    }
    UnwindResult u = unwinder_->unwind(k.waker_pid, k.regs, k.stack, unwound_);
    if (u.count == 0) continue;
    path_.clear();
    if (u.end != UnwindEnd::Complete) path_.push_back(profile_.label_frame("(stack truncated)"));
    for (size_t f = u.count; f-- > 0;) path_.push_back(profile_.native_frame(unwound_[f]));
    wakes_[index].stack = profile_.stacks.intern_path(path_);
    ++waker_stacks_;
  }
  pending_wakes_.resize(kept);
}

// Each off-CPU marker that is not a preemption gets the last wakeup of its thread within its span: "NAME TID"
// of the waker. A wakeup with the waker's stack also becomes a `Wakeup` marker on the waker's thread: whom
// it woke, the lock (the futex word it woke, for a `Lock wait`), and the stack that released it.
void ProfileBuilder::name_wakers() {
  std::sort(wakes_.begin(), wakes_.end(), [](const Wake& a, const Wake& b) {
    return a.wakee_tid != b.wakee_tid ? a.wakee_tid < b.wakee_tid : a.time < b.time;
  });
  // Threads by tid (a tid may be reused: the one alive at the time is meant).
  std::unordered_multimap<uint32_t, model::Thread*> by_tid;
  for (model::Process& proc : profile_.processes)
    for (model::Thread& t : proc.threads) by_tid.emplace(t.tid, &t);
  auto thread_at = [&](uint32_t tid, uint64_t time) -> model::Thread* {
    model::Thread *found = nullptr, *any = nullptr;
    for (auto [it, end] = by_tid.equal_range(tid); it != end; ++it) {
      any = it->second;
      if (it->second->start_ns <= time && (!it->second->end_ns || time <= *it->second->end_ns))
        found = it->second;
    }
    return found ? found : any;
  };
  std::vector<std::pair<model::Thread*, model::Marker>> wakeups;
  char buf[64];
  for (model::Process& proc : profile_.processes)
    for (model::Thread& t : proc.threads)
      for (model::Marker& m : t.markers) {
        if (m.type != off_type_ || m.name == preempted_name_) continue;
        // The last wakeup of this thread at or before the end of the span, if it is within the span.
        auto it = std::upper_bound(wakes_.begin(), wakes_.end(), std::make_pair(t.tid, m.end_ns),
                                   [](const std::pair<uint32_t, uint64_t>& key, const Wake& w) {
                                     return key.first != w.wakee_tid ? key.first < w.wakee_tid
                                                                     : key.second < w.time;
                                   });
        if (it == wakes_.begin()) continue;
        --it;
        if (it->wakee_tid != t.tid || it->time < m.start_ns) continue;
        model::Thread* waker = it->flags ? nullptr : thread_at(it->waker_tid, it->time);
        if (it->flags & kWakeInterrupt) {
          // The task an interrupt hit is no waker: a sleep's end is its timer, anything else an interrupt.
          const bool sleep = !m.fields.empty() && profile_.strings.get(m.fields[0].string) == "sleep";
          std::snprintf(buf, sizeof buf, "%s", sleep ? "timer" : "interrupt");
        } else if (it->flags & kWakeUntraced) {
          std::snprintf(buf, sizeof buf, "pid %u (not recorded)", it->waker_pid);
        } else {
          std::snprintf(buf, sizeof buf, "%.40s %u", waker ? waker->name.c_str() : "thread", it->waker_tid);
        }
        m.fields.push_back({waker_key_, true, 0, profile_.strings.intern(buf)});
        if (it->stack == model::kNoStack || !waker) continue;
        model::Marker w;
        w.name = wakeup_name_;
        w.start_ns = it->time;
        w.phase = model::MarkerPhase::Instant;
        w.type = wakeup_name_;
        w.stack = it->stack;
        std::snprintf(buf, sizeof buf, "%.40s %u", t.name.c_str(), t.tid);
        w.fields.push_back({wakee_key_, true, 0, profile_.strings.intern(buf)});
        if (m.name == lock_name_ && it->uaddr) {
          std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(it->uaddr));
          w.fields.push_back({lock_key_, true, 0, profile_.strings.intern(buf)});
        }
        wakeups.emplace_back(waker, std::move(w));
      }
  // Appended after the walk: a waker's markers may be the ones being walked.
  for (auto& [thread, w] : wakeups) thread->markers.push_back(std::move(w));
}

}  // namespace fxprof::recorder
