#include "model/counters.h"

#include <algorithm>

namespace fxprof::model {

void CounterSeries::read(uint64_t time_ns, int64_t delta, uint64_t ops) {
  if (samples_.empty()) {  // the first read starts the track
    samples_.push_back({time_ns, delta, ops});
    return;
  }
  const CounterSample& last = samples_.back();
  if (time_ns <= last.time_ns && (delta != 0 || ops != 0)) {  // the same instant: one sample
    samples_.back().delta += delta;
    samples_.back().count += ops;
    return;
  }
  if (delta == 0 && ops == 0) {
    if (time_ns <= last.time_ns) return;
    // A rate falls to zero at the first read that saw nothing more, not at the next change.
    if (graph_ == Graph::Rate && (last.delta != 0 || last.count != 0)) {
      samples_.push_back({time_ns, 0, 0});
      holding_ = false;
      return;
    }
    held_ns_ = time_ns;
    holding_ = true;
    return;
  }
  // A change: the value still held at the last read before it.
  if (holding_ && held_ns_ > last.time_ns + resolution_ns_) samples_.push_back({held_ns_, 0, 0});
  holding_ = false;
  samples_.push_back({time_ns, delta, ops});
}

std::vector<CounterSample> CounterSeries::finish(uint64_t end_ns) {
  // Reads after the end are the end's: a process read while it exits (after its exit record, before it is a
  // zombie) changes nothing more, and its track must not outlast it.
  if (end_ns != 0 && !samples_.empty()) {
    size_t kept = 0;
    for (size_t i = 0; i < samples_.size(); ++i) {
      CounterSample s = samples_[i];
      s.time_ns = std::min(s.time_ns, end_ns);
      if (kept > 0 && samples_[kept - 1].time_ns == s.time_ns) {
        samples_[kept - 1].delta += s.delta;
        samples_[kept - 1].count += s.count;
      } else {
        samples_[kept++] = s;
      }
    }
    samples_.resize(kept);
    held_ns_ = std::min(held_ns_, end_ns);
  }
  // The value holds to the end (a flat line from the last sample); without a known end, to the last read.
  if (!samples_.empty()) {
    const uint64_t last = std::max(end_ns, holding_ ? held_ns_ : 0);
    if (last > samples_.back().time_ns) samples_.push_back({last, 0, 0});
  }
  holding_ = false;
  return std::move(samples_);
}

uint64_t counter_end(const Profile& profile, const Process& proc, uint64_t fallback) {
  if (proc.end_ns) return *proc.end_ns;
  return profile.meta.end_monotonic_ns.value_or(fallback);
}

}  // namespace fxprof::model
