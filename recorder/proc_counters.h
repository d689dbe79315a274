// fxprof recorder: the scheduling and fault counter tracks every recording gets, one set per process, beside
// CPU and RSS: page faults (minor, major), context switches and run-queue delay.
//
// Read on the RSS sampler's ticks (every 10 ms, recorder/rss.h) from /proc: the process's minflt and majflt
// (/proc/PID/stat, all its threads), and per live thread /proc/PID/task/TID/schedstat's run delay (time
// runnable, waiting for a CPU) and timeslice count (times it was switched in: its context switches). Each
// counter sample is the change since the previous one, so the Firefox Profiler draws when the program
// faulted or waited for a CPU on the same timeline as the samples; model/counters.h writes them (a zero at
// the read before and after each change, one at the process's end). In attach mode what happened before
// the first tick is the baseline, not a spike.
//
// Cost (measured by the sampler itself, `-v` prints it): one /proc/PID/stat read per process and one
// schedstat read per thread per tick: 25 us a tick for one thread, 61 us for node's 7 here, 0.25-0.6 % of
// a CPU at 100 ticks a second.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "model/counters.h"
#include "model/profile.h"
#include "recorder/host.h"

namespace fxprof::recorder {

class ProcCounters {
 public:
  explicit ProcCounters(Procfs& procfs) : procfs_(procfs) {}
  ProcCounters(const ProcCounters&) = delete;
  ProcCounters& operator=(const ProcCounters&) = delete;

  // Attach mode: counts from before the first tick are a baseline (the process ran before we came).
  void set_attached() { attached_ = true; }
  // Reads every live process's counters at `now_ns` (the RSS sampler's tick time).
  void tick(const model::Profile& profile, uint64_t now_ns);
  // Adds the counters with any change to each process.
  void finish(model::Profile& profile);

  uint64_t ticks() const { return ticks_; }
  uint64_t tick_ns() const { return tick_ns_; }  // wall time spent in tick()

 private:
  enum { kMinor, kMajor, kSwitches, kRunDelay, kKinds };
  struct Series {
    uint64_t last[kKinds] = {};  // cumulative values at the last tick
    bool moved[kKinds] = {};     // any change at all
    std::vector<model::CounterSeries> samples =
        std::vector<model::CounterSeries>(kKinds, model::CounterSeries(model::CounterSeries::Graph::Rate));
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> threads;  // tid -> (run delay ns, timeslices)
    bool seen = false;
  };
  void add(Series& s, int kind, uint64_t now, uint64_t value);
  Procfs& procfs_;
  bool attached_ = false;
  uint64_t ticks_ = 0, tick_ns_ = 0, last_tick_ = 0;
  std::map<uint32_t, Series> series_;  // index into profile.processes
};

}  // namespace fxprof::recorder
