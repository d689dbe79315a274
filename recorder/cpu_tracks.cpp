#include "recorder/cpu_tracks.h"

#include <algorithm>

namespace fxprof::recorder {

namespace {
constexpr uint32_t kCpusPid = 0x7ffffff0;  // no real pid: the kernel's pid_max is at most 2^22
}

model::Thread& CpuTracks::track(model::Profile& profile, uint32_t cpu, uint64_t time_ns) {
  if (proc_ == kNone) {
    model::Process p;
    p.pid = kCpusPid;
    p.name = "CPUs";
    p.start_ns = profile.meta.start_monotonic_ns;
    profile.processes.push_back(std::move(p));
    proc_ = static_cast<uint32_t>(profile.processes.size() - 1);
  }
  model::Process& p = profile.processes[proc_];
  auto [it, fresh] = thread_of_cpu_.try_emplace(cpu, static_cast<uint32_t>(p.threads.size()));
  if (fresh) {
    model::Thread t;
    t.tid = kCpusPid + 1 + cpu;
    t.name = "CPU " + std::to_string(cpu);
    t.start_ns = std::min(time_ns, profile.meta.start_monotonic_ns);
    p.threads.push_back(std::move(t));
  }
  return p.threads[it->second];
}

void CpuTracks::add(model::Profile& profile, uint32_t cpu, uint64_t time_ns, uint32_t proc, uint32_t thread,
                    std::span<const model::FrameId> path) {
  auto [label, fresh] = labels_.try_emplace({proc, thread}, model::FrameId{});
  if (fresh) {
    const model::Process& p = profile.processes[proc];
    const model::Thread& t = p.threads[thread];
    label->second = profile.label_frame(p.name.substr(0, p.name.find(' ')) + " / " + t.name + " (tid " +
                                        std::to_string(t.tid) + ")");
  }
  path_.assign(1, label->second);
  path_.insert(path_.end(), path.begin(), path.end());
  model::Sample s;
  s.time_ns = time_ns;
  s.stack = profile.stacks.intern_path(path_);
  track(profile, cpu, time_ns).samples.push_back(s);
}

void CpuTracks::add_idle(model::Profile& profile, uint32_t cpu, uint64_t time_ns) {
  path_.assign(1, profile.label_frame("(idle)", model::Category::Idle));
  model::Sample s;
  s.time_ns = time_ns;
  s.stack = profile.stacks.intern_path(path_);
  s.cpu_delta_ns = 0;
  track(profile, cpu, time_ns).samples.push_back(s);
}

}  // namespace fxprof::recorder
