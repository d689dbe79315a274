// fxprof recorder internals: `record -a --per-cpu` (samply's --per-cpu-threads, on our timeline): a process
// "CPUs" with one thread per CPU, "CPU N", holding a copy of every CPU sample taken on that CPU, its stack
// rooted at a label naming who ran ("PROCESS / THREAD (tid N)"), and "(idle)" samples when the CPU had
// nothing to run. Selecting a CPU track shows what ran on it over time; its call tree, the mix.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/profile.h"

namespace fxprof::recorder {

class CpuTracks {
 public:
  // A sample of thread (proc, thread) (indices into profile.processes) taken on `cpu`, its path root first.
  void add(model::Profile& profile, uint32_t cpu, uint64_t time_ns, uint32_t proc, uint32_t thread,
           std::span<const model::FrameId> path);
  // A sample of the idle task on `cpu`.
  void add_idle(model::Profile& profile, uint32_t cpu, uint64_t time_ns);

 private:
  model::Thread& track(model::Profile& profile, uint32_t cpu, uint64_t time_ns);

  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t proc_ = kNone;  // the "CPUs" process, made at the first sample
  std::map<uint32_t, uint32_t> thread_of_cpu_;
  std::map<std::pair<uint32_t, uint32_t>, model::FrameId> labels_;  // (proc, thread) -> its root label
  std::vector<model::FrameId> path_;
};

}  // namespace fxprof::recorder
