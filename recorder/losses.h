// fxprof recorder internals: the builder's losses tracker (tracker.h): records the kernel dropped (a full
// ring buffer) as LostRecords markers on the thread that lost them, counted with the throttles it applied
// (TrackerContext::counts).
#pragma once

#include <cstdint>

#include "recorder/tracker.h"

namespace fxprof::recorder {

class LossTracker final : public Tracker {
 public:
  explicit LossTracker(TrackerContext& c) : c_(c) {}
  void on_lost(const LostRecord& l) override;
  void on_throttle(const ThrottleRecord&) override { ++c_.counts.throttled; }
  void on_model_reset() override { name_ = type_ = count_key_ = model::kNoString; }

 private:
  TrackerContext& c_;
  bool schema_ = false;  // the LostRecords marker schema is in the profile's meta
  model::StringId name_ = model::kNoString, type_ = model::kNoString, count_key_ = model::kNoString;
};

}  // namespace fxprof::recorder
