// Latency weighting (model/latency.h).
#include "model/latency.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace fxprof::model {

namespace {

bool on_cpu(const Profile& p, const Sample& s) { return s.stack != kNoStack && !p.off_cpu(s.stack); }

}  // namespace

LatencyStats keep_latency_samples(Profile& p) {
  LatencyStats stats;
  const uint64_t interval = static_cast<uint64_t>(std::max(p.meta.interval_ms, 0.001) * 1e6);
  auto run_of = [&](const Sample& s) {
    const uint64_t d = s.cpu_delta_ns < 0 ? interval : static_cast<uint64_t>(s.cpu_delta_ns);
    return std::clamp<uint64_t>(d, 1, 4 * interval);
  };
  // Every run's start and end, sorted: the runs covering t are those started before t, less those ended.
  std::vector<uint64_t> starts, ends;
  for (const Process& proc : p.processes)
    for (const Thread& t : proc.threads) {
      for (const Sample& s : t.samples)
        if (on_cpu(p, s)) {
          starts.push_back(s.time_ns - std::min(s.time_ns, run_of(s)));
          ends.push_back(s.time_ns);
        }
    }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  auto running_at = [&](uint64_t t) {
    const auto begun = std::lower_bound(starts.begin(), starts.end(), t) - starts.begin();
    const auto over = std::lower_bound(ends.begin(), ends.end(), t) - ends.begin();
    return std::max<std::ptrdiff_t>(begun - over, 1);
  };
  std::vector<uint32_t> order;
  std::vector<char> keep;
  for (Process& proc : p.processes)
    for (Thread& t : proc.threads) {
      order.resize(t.samples.size());
      std::iota(order.begin(), order.end(), 0u);
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t a, uint32_t b) { return t.samples[a].time_ns < t.samples[b].time_ns; });
      keep.assign(t.samples.size(), 1);
      double owed = 0;  // weight not yet given out as kept samples
      for (uint32_t i : order) {
        const Sample& s = t.samples[i];
        if (!on_cpu(p, s)) continue;
        ++stats.on_cpu;
        owed += 1.0 / static_cast<double>(running_at(s.time_ns));
        keep[i] = owed >= 0.5;
        if (keep[i]) {
          owed -= 1;
          ++stats.kept;
        }
      }
      size_t n = 0;
      for (size_t i = 0; i < t.samples.size(); ++i)
        if (keep[i]) t.samples[n++] = t.samples[i];
      t.samples.resize(n);
    }
  return stats;
}

}  // namespace fxprof::model
