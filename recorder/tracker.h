// fxprof recorder internals: a tracker is one concern of the profile builder (builder.h), fed the typed
// records (records.h) in time order, after the builder has registered their processes and threads.
//
// A new concern: a Tracker subclass in a file of its own that writes what it learns into the profile (in its
// hooks or at finish()), and one line in make_trackers() (trackers.cpp), the list of trackers in the order
// each record reaches them. Nothing else changes: the builder calls every hook of every tracker. It is tested
// like the others, with synthetic records through the RecordSource boundary (tests/recorder/*_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/profile.h"
#include "recorder/host.h"
#include "recorder/records.h"
#include "recorder/waker.h"

namespace fxprof::recorder {

class Unwinder;

// Facts trackers give the rest of the builder (and the recording's summary).
struct RecordCounts {
  uint64_t lost = 0;          // records the kernel dropped so far
  uint64_t throttled = 0;     // throttle records
  uint64_t wakes = 0;         // wakeups the waker tracer reported
  uint64_t waker_stacks = 0;  // of those, with the waker's stack unwound
};

// What a tracker may use of the recording.
struct TrackerContext {
  model::Profile& profile;
  Procfs& procfs;
  // The profile's thread `tid` is now (null when none is known).
  std::function<model::Thread*(uint32_t tid)> thread_of;
  // Off-CPU: when thread `tid`'s open off-CPU span began (it is switched out now), none if it runs.
  std::function<std::optional<uint64_t>(uint32_t tid)> out_since;
  Unwinder* unwinder = nullptr;  // null in frame-pointer mode
  bool off_cpu = false;          // off-CPU spans are recorded (their marker schemas and names are interned)
  RecordCounts counts;
};

class Tracker {
 public:
  virtual ~Tracker() = default;
  virtual void on_sample(const SampleRecord&) {}
  virtual void on_mmap2(const Mmap2Record&) {}
  virtual void on_comm(const CommRecord&) {}
  virtual void on_fork(const ForkRecord&) {}
  virtual void on_exit(const ExitRecord&) {}
  virtual void on_switch(const SwitchRecord&) {}
  virtual void on_lost(const LostRecord&) {}
  virtual void on_throttle(const ThrottleRecord&) {}
  // The eBPF waker tracer's wakeups (waker.h), given before the round of records they happened in.
  virtual void on_wakings(std::span<Waking>) {}
  // The stacks of `pid` taken before `before_ns` must be unwound now: its exec or its last thread's exit is
  // next, and the unwinder forgets its mappings. Pid 0: the round's records are about to be released.
  virtual void release(uint32_t, uint64_t) {}
  // Every record of the recording was handled; kernel frames and off-CPU reasons are named, JIT frames not
  // yet.
  virtual void finish() {}
};

// The trackers of a recording, in the order each record reaches them (trackers.cpp).
std::vector<std::unique_ptr<Tracker>> make_trackers(TrackerContext& context);

}  // namespace fxprof::recorder
