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
#include <vector>

#include "model/profile.h"
#include "recorder/host.h"
#include "recorder/records.h"

namespace fxprof::recorder {

// Facts trackers give the rest of the builder (and the recording's summary).
struct RecordCounts {
  uint64_t lost = 0;       // records the kernel dropped so far
  uint64_t throttled = 0;  // throttle records
};

// What a tracker may use of the recording.
struct TrackerContext {
  model::Profile& profile;
  Procfs& procfs;
  // The profile's thread `tid` is now (null when none is known).
  std::function<model::Thread*(uint32_t tid)> thread_of;
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
  // Every record of the recording was handled.
  virtual void finish() {}
};

// The trackers of a recording, in the order each record reaches them (trackers.cpp).
std::vector<std::unique_ptr<Tracker>> make_trackers(TrackerContext& context);

}  // namespace fxprof::recorder
