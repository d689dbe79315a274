// fxprof recorder internals: the builder's off-CPU spans tracker (tracker.h). Switch records time each wait
// of a thread (switch-out .. switch-in), which becomes samples of blocked time and, above the threshold, a
// marker; a switch-out's sample (the context-switches event) gives the wait its stack. That sample is
// unwound (TrackerContext::unwind_sample) only if its span turns out to need the stack: it waits in its ring
// buffer slot until the thread runs again, or until the end of the reading round (release) while the thread
// is still out. At 26k switches/s 5-8 % of them are unwound. The reasons ("[blocked: futex]", "Lock wait")
// come from the kernel frames once they are named (kernel_named). Other trackers read when a thread's open
// wait began through TrackerContext::out_since, which this tracker provides.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "recorder/offcpu.h"
#include "recorder/tracker.h"

namespace fxprof::recorder {

class OffCpuTracker final : public Tracker {
 public:
  explicit OffCpuTracker(TrackerContext& c);
  void set_off_cpu(const OffCpuConfig& config) override;
  void on_attached(uint32_t pid, uint32_t tid, uint64_t time_ns) override;
  void forget_thread(uint32_t tid) override { threads_.erase(tid); }
  void on_sample(const SampleRecord& s) override;  // a switch-out's (SampleRecord::switch_event)
  void on_switch(const SwitchRecord& s) override;
  // Wake times: a blocked span that one ends is blocked up to it and runnable (preempted) after it.
  void on_wakings(std::span<Waking> w) override;
  void release(uint32_t pid, uint64_t before_ns, Release why) override;
  void on_end(uint64_t end_ns) override;  // threads still out get their wait up to the end
  void kernel_named() override;           // off-CPU samples and markers get their reasons
  void finish() override;                 // the "Threads waiting" counters

 private:
  // A thread's current switch-out, and the stack its context-switches sample took.
  struct OffState {
    bool out = false, preempted = false, have_stack = false;
    uint64_t out_ns = 0;
    model::StackId stack = model::kNoStack;  // the blocking stack (no reason leaf)
    // The switch-out's sample, not unwound yet (have_stack is set): resolve_stack() or end_span unwind it
    // when the span needs its stack; most spans at high switch rates are shorter than the sampling interval
    // and the marker threshold and never do.
    bool pending = false;
    SampleRecord pending_sample;              // its spans point into the ring buffer until the round's end
    bool queued = false;                      // in pending_tids_
    uint64_t uaddr = 0;                       // RDI at the system call: a futex wait's lock address
    uint64_t acc = 0;                         // blocked ns not yet given a sample
    BlockReason hint = BlockReason::Unknown;  // attach mode: the wait channel of a thread found asleep
  };

  void end_span(uint32_t tid, OffState& o, uint64_t in_ns);
  // One part of a span, from o.out_ns to `to`, as o.preempted says: samples and, above the threshold, a
  // marker. `whole_ns`: the whole span's length, which decides whether its stack is unwound.
  void span_part(uint32_t tid, OffState& o, uint64_t to, uint64_t whole_ns);
  // The pending switch-out sample of a thread becomes its blocking stack.
  void resolve_stack(OffState& o);
  void name_reasons();

  TrackerContext& c_;
  OffCpuConfig config_;
  std::unordered_map<uint32_t, OffState> threads_;  // by tid: the builder's threads (forget_thread)
  std::vector<uint32_t> pending_tids_;              // threads whose OffState::pending is set
  // Each thread's wakes not yet past (tid -> times, sorted): a blocked span that one ends is blocked up to it
  // and runnable (waiting for a CPU: [preempted]) after it. A round may hold several of a thread's waits.
  std::unordered_map<uint32_t, std::deque<uint64_t>> wake_times_;
  // Off-CPU samples and markers get their reason in kernel_named(): until then the samples' leaf is
  // `pending_frame_` and the waits' reason is Pending.
  bool interned_ = false;
  model::FrameId pending_frame_ = 0, preempted_frame_ = 0;
  model::StringId off_type_ = model::kNoString;
};

}  // namespace fxprof::recorder
