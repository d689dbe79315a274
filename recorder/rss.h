// fxprof recorder: the RSS counter every recording gets, one per process, from /proc/PID/statm.
//
// The recording loop (recorder.cpp) polls fd(), a timerfd that fires every kIntervalNs, and calls tick()
// after each round of reading; tick() reads the resident page count of every process the profile knows and
// has not seen exit. finish() turns what was read into a Gecko counter per process ("RSS", category Memory:
// the front end draws it as a memory track), each sample the change since the previous one. Only changes
// are written, each as a step, and a last sample at the process's end (or the recording's), so the track
// covers the process's whole life (model/counters.h, the writer of every counter).
//
// Cost: one open/read/close of a 30-byte /proc file per live process per tick (~10 us), 100 times a second;
// unprivileged (the recorded programs are our own or ptrace-able). A process is sampled once its own
// mappings are known: the launched child before its exec is a copy of fxprof, not the program.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "base/fd.h"
#include "model/counters.h"
#include "model/profile.h"
#include "recorder/host.h"

namespace fxprof::recorder {

class RssSampler {
 public:
  static constexpr uint64_t kIntervalNs = 10'000'000;  // 10 ms

  // Reads statm through `procfs` (recorder/host.h: the live /proc, or a capture's answers).
  explicit RssSampler(Procfs& procfs);
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  // Readable when a sample is due (-1 if no timerfd could be made: ticks then follow the loop's own pace).
  int fd() const { return timer_.get(); }
  // Samples every live process of `profile` when the interval has passed since the last sample (`now_ns`:
  // CLOCK_MONOTONIC, or the time a capture recorded).
  void tick(const model::Profile& profile, uint64_t now_ns);
  // Adds an "RSS" counter to each process that was sampled.
  void finish(model::Profile& profile);

 private:
  struct Series {
    int64_t last = 0;  // bytes at the last read
    model::CounterSeries samples{model::CounterSeries::Graph::Level};
  };
  Procfs& procfs_;
  UniqueFd timer_;
  uint64_t page_size_;
  uint64_t next_ns_ = 0;
  std::map<uint32_t, Series> series_;  // index into profile.processes -> its samples
};

}  // namespace fxprof::recorder
