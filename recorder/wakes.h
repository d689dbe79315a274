// fxprof recorder internals: the builder's wakers tracker (tracker.h): who woke each off-CPU wait, and the
// waker's stack at a futex wake as a Wakeup marker on its thread. Its input is the eBPF waker tracer's
// wakeups (waker.h), not perf records; the off-CPU spans' markers it annotates are the builder's.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "recorder/tracker.h"

namespace fxprof::recorder {

// A wake may be stamped before the wait it ends: the kernel's sched_waking fires as soon as the waker finds
// the wakee in its sleeping state, which the wakee sets before it leaves the CPU, and the wakee's switch-out
// is stamped later (seen 10 us later with both CPUs busy; a host that preempts the vCPU in between stretches
// it). Such a wake, after the thread's previous span, belongs to the span that starts within this.
inline constexpr uint64_t kWakeBeforeSwitchNs = 1'000'000;

class WakeTracker final : public Tracker {
 public:
  explicit WakeTracker(TrackerContext& c) : c_(c) {}
  // Wakeups in any order; their stacks are moved out and unwound at release() if a marker needs them.
  void on_wakings(std::span<Waking> w) override;
  void on_waking(Waking& w, model::StackId waker_stack) override;  // perf.data's: the stack made already
  void release(uint32_t pid, uint64_t before_ns, Release) override { resolve(pid, before_ns); }
  void finish() override;

 private:
  // A wakeup as name_wakers() uses it: its waker's stack once unwound (futex wakes in DWARF mode).
  struct Wake {
    uint64_t time = 0;
    uint32_t waker_pid = 0, waker_tid = 0, wakee_tid = 0;
    uint32_t flags = 0;  // kWake*: an interrupt's or an untraced task's wake names no thread
    uint64_t uaddr = 0;
    model::StackId stack = model::kNoStack;
  };
  enum class Need : uint8_t { No, Yes, Open };
  Need need(const Wake& w) const;
  // Unwinds the waker stacks that a marker needs (need()): those of `pid` before `before_ns` (its exit or
  // exec: later ones are the new program's, described by records not handled yet), or with pid 0 all whose
  // wait has ended (the others wait for a later round).
  void resolve(uint32_t pid, uint64_t before_ns);
  void name_wakers();

  TrackerContext& c_;
  std::vector<Wake> wakes_;
  std::vector<std::pair<size_t, Waking>> pending_;  // index into wakes_, the waking with its stack
  std::vector<model::FrameId> path_;
  std::array<uint64_t, 1024> unwound_{};
};

}  // namespace fxprof::recorder
