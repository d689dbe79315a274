// The critical path's walk on a recording's worth of model (issue 34: a 60 s, 16-thread recording's path in
// under 1 s): 16 threads sampled at 1 kHz for 60 s (640k samples), each alternating 2 ms of CPU and a 1 ms
// wait woken by the next thread (a chain of 16 hops through every thread), 320k waits in all. Times
// critical_path() of the first thread over the whole recording, critical_path_tracks() (what `record` adds
// to the file) and the --latency weighting. Run it on the optimised build (bench/critical_path.sh).
#include <chrono>
#include <cstdio>
#include <vector>

#include "model/critical_path.h"
#include "model/latency.h"

using namespace fxprof::model;

namespace {

constexpr uint64_t kMs = 1'000'000;

Profile make_profile(uint32_t threads, uint64_t seconds) {
  Profile p;
  Process& proc = p.processes.emplace_back();
  proc.pid = 100;
  proc.name = "bench";
  std::vector<StackId> stacks;
  for (int i = 0; i < 64; ++i) {  // 64 distinct 20-frame stacks
    std::vector<FrameId> frames;
    for (int d = 0; d < 20; ++d)
      frames.push_back(p.native_frame(0x400000 + static_cast<uint64_t>(i * 64 + d)));
    stacks.push_back(p.stacks.intern_path(frames));
  }
  proc.threads.resize(threads);
  const uint64_t end = seconds * 1000 * kMs;
  for (uint32_t t = 0; t < threads; ++t) {
    Thread& th = proc.threads[t];
    th.tid = 100 + t;
    th.name = "worker";
    th.is_main = t == 0;
    uint64_t now = t * 97'000;  // staggered
    size_t k = t;
    while (now < end) {
      for (int s = 0; s < 2; ++s, now += kMs)
        th.samples.push_back({now, stacks[k++ % stacks.size()], 1'000'000});
      Wait w;
      w.start_ns = now;
      w.end_ns = w.wake_ns = now + kMs;
      w.reason = WaitReason::Futex;
      w.waker = Waker::Thread;
      w.waker_pid = 100;
      w.waker_tid = 100 + (t + 1) % threads;
      th.waits.push_back(w);
      now += kMs;
    }
  }
  return p;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main() {
  Profile p = make_profile(16, 60);
  size_t samples = 0, waits = 0;
  for (const Thread& t : p.processes[0].threads) {
    samples += t.samples.size();
    waits += t.waits.size();
  }
  std::printf("profile: 16 threads, 60 s, %zu samples, %zu waits\n", samples, waits);
  const Process& proc = p.processes[0];
  auto t0 = std::chrono::steady_clock::now();
  const CriticalPath path = critical_path(p, proc, proc.threads[0], 0, 60'000 * kMs);
  std::printf("critical_path (whole recording): %.1f ms, %zu segments\n", ms_since(t0), path.segments.size());
  t0 = std::chrono::steady_clock::now();
  const std::vector<SyntheticThread> tracks = critical_path_tracks(p, kMs);
  std::printf("critical_path_tracks (record's tracks): %.1f ms, %zu track(s), %zu samples\n", ms_since(t0),
              tracks.size(), tracks.empty() ? size_t{0} : tracks[0].thread.samples.size());
  t0 = std::chrono::steady_clock::now();
  const LatencyStats st = keep_latency_samples(p);
  std::printf("--latency weighting: %.1f ms (%llu of %llu on-CPU samples kept)\n", ms_since(t0),
              static_cast<unsigned long long>(st.kept), static_cast<unsigned long long>(st.on_cpu));
  return 0;
}
