// fxprof model: one writer for every counter track (RSS, heap, page faults, context switches, run-queue
// delay, threads waiting), so that each is drawn as what happened.
//
// The Firefox Profiler draws straight lines between a counter's samples and stops at its last one
// (src/components/timeline/TrackCounterGraph.tsx). Category "Memory" draws the running sum of `count` (a
// level); every other category draws count / time since the previous sample (a rate). So:
//  - a value that held needs a sample where it still held, or its change is drawn as a ramp from the
//    previous sample (one major fault in node drawn as a 365 ms slope; a 50 MiB block held for 2 s drawn as
//    a line falling from its allocation to its free);
//  - a rate needs a zero sample at the first read after its last change, or its fall is drawn across the
//    whole quiet time that follows;
//  - every track needs a sample at its process's end, or it stops at its last change (nginx's master's
//    tracks ended at 0.28 s of a 5 s recording).
#pragma once

#include <cstdint>
#include <vector>

#include "model/profile.h"

namespace fxprof::model {

class CounterSeries {
 public:
  enum class Graph { Level, Rate };
  // `resolution_ns`: a hold sample closer than this to the previous sample is left out (the heap's 1 ms
  // buckets: a ramp shorter than a bucket is all the data says anyway).
  explicit CounterSeries(Graph graph, uint64_t resolution_ns = 0)
      : graph_(graph), resolution_ns_(resolution_ns) {}

  // A read at `time_ns` (non-decreasing): the value changed by `delta` in `ops` operations since the previous
  // read; delta 0 and ops 0 is a read that found it unchanged.
  void read(uint64_t time_ns, int64_t delta, uint64_t ops = 0);
  bool empty() const { return samples_.empty(); }
  // The samples, ending at `end_ns` (its process's end: counter_end) when that is later than the last read.
  std::vector<CounterSample> finish(uint64_t end_ns);

 private:
  Graph graph_;
  uint64_t resolution_ns_;
  std::vector<CounterSample> samples_;
  uint64_t held_ns_ = 0;  // the last read that found no change and was not written
  bool holding_ = false;
};

// When `proc`'s counter tracks end: its exit, else the recording's end, else `fallback` (0: at the last
// read).
uint64_t counter_end(const Profile& profile, const Process& proc, uint64_t fallback);

}  // namespace fxprof::model
