// Known answers for `--latency` (tests/e2e/critical_path_test.cpp): a serial phase (lat_serial: 200 ms of
// the main thread's CPU) then a parallel one (lat_parallel: 300 ms of CPU in each of two threads).
// Logs "serial MS" and "parallel MS" (CPU ms computed) and "parallel_running MS": the wall time during which
// at least one of the parallel threads ran, from their own clocks: each spins in ~0.1 ms chunks and ran over
// the chunk's last CPU-delta of wall time (what fxprof's weighting assumes of a sample); the union of those
// runs is what the latency weights of the parallel phase add up to, however the scheduler interleaved them.
#include <pthread.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "wall_log.h"

namespace {

volatile unsigned long sink;

struct Runs {
  std::vector<std::pair<double, double>> spans;  // wall ms [from, to] the thread ran
  double cpu = 0;
};

// `ms` of this thread's CPU, in chunks of ~0.1 ms wall, each recorded as the run it stands for.
__attribute__((noinline)) void spin_recorded(double ms, Runs& runs) {
  const double start_cpu = thread_cpu_ms();
  unsigned long x = 1;
  while (thread_cpu_ms() < start_cpu + ms) {
    const double c0 = thread_cpu_ms(), w0 = monotonic_ms();
    while (monotonic_ms() < w0 + 0.1)
      for (int i = 0; i < 200; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
    const double c1 = thread_cpu_ms(), w1 = monotonic_ms();
    runs.spans.push_back({w1 - std::min(c1 - c0, w1 - w0), w1});
  }
  runs.cpu = thread_cpu_ms() - start_cpu;
  sink = x;
}

// Each keeps its frame: work after the call, so that it is no tail call.
__attribute__((noinline)) void lat_serial(Runs& runs) {
  spin_recorded(200, runs);
  sink = sink + 1;
}

__attribute__((noinline)) void lat_parallel(Runs& runs) {
  spin_recorded(300, runs);
  sink = sink + 1;
}

void* parallel_thread(void* arg) {
  lat_parallel(*static_cast<Runs*>(arg));
  return nullptr;
}

// The measure of the union of the spans.
double union_ms(std::vector<std::pair<double, double>> spans) {
  std::sort(spans.begin(), spans.end());
  double total = 0, from = 0, to = -1;
  for (const auto& [a, b] : spans) {
    if (a > to) {
      total += std::max(0.0, to - from);
      from = a;
      to = b;
    } else {
      to = std::max(to, b);
    }
  }
  return total + std::max(0.0, to - from);
}

}  // namespace

int main() {
  Runs serial;
  lat_serial(serial);
  ms_log("serial", serial.cpu);
  Runs par[2];
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], nullptr, parallel_thread, &par[i]);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], nullptr);
  ms_log("parallel", par[0].cpu + par[1].cpu);
  std::vector<std::pair<double, double>> spans = par[0].spans;
  spans.insert(spans.end(), par[1].spans.begin(), par[1].spans.end());
  ms_log("parallel_running", union_ms(std::move(spans)));
  return 0;
}
