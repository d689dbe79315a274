// The "Threads waiting" counters (model/profile.h, add_waiting_counters): made by the recorder from its Lock
// wait markers and made again by passes/locks.h when symbolication turns some of them into other waits.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "model/counters.h"
#include "model/profile.h"

namespace fxprof::model {

void add_waiting_counters(model::Profile& profile, uint64_t interval_ns) {
  if (interval_ns == 0) return;
  std::vector<std::pair<uint64_t, uint64_t>> cells;  // one thread's waits as [first, last] cells
  for (model::Process& proc : profile.processes) {
    std::map<uint64_t, int64_t> change;  // cell -> change in waiting threads at its start
    for (const model::Thread& t : proc.threads) {
      cells.clear();
      for (const model::Wait& m : t.waits) {
        if (m.reason != model::WaitReason::Futex || !m.lock) continue;  // a lock wait (a `Lock wait` marker)
        const uint64_t s = m.start_ns > proc.start_ns ? m.start_ns - proc.start_ns : 0;
        const uint64_t e = m.end_ns > proc.start_ns ? m.end_ns - proc.start_ns : 0;
        cells.emplace_back(s / interval_ns, (e > s ? e - 1 : s) / interval_ns);
      }
      // A thread counts once per cell, however many of its waits touch it.
      std::sort(cells.begin(), cells.end());
      for (size_t i = 0; i < cells.size();) {
        uint64_t first = cells[i].first, last = cells[i].second;
        for (++i; i < cells.size() && cells[i].first <= last + 1; ++i) last = std::max(last, cells[i].second);
        ++change[first];
        --change[last + 1];
      }
    }
    if (change.empty()) continue;
    model::CounterSeries series(model::CounterSeries::Graph::Rate);
    uint64_t written = 0;
    auto emit = [&](uint64_t cell, int64_t n) {
      const uint64_t t = proc.start_ns + cell * interval_ns;
      if (!series.empty() && written >= t) return;
      written = t;
      series.read(t, n);
    };
    int64_t waiting = 0;
    for (auto it = change.begin(); it != change.end(); ++it) {
      const uint64_t cell = it->first;
      if (waiting == 0 && cell > 0) emit(cell - 1, 0);  // a run starts after a regular zero cell
      waiting += it->second;
      const uint64_t until = std::next(it) == change.end() ? cell + 1 : std::next(it)->first;
      for (uint64_t k = cell; k < until && (waiting > 0 || k == cell); ++k) emit(k, waiting);
    }
    proc.counters.push_back({"Threads waiting", "Locks",
                             "Threads waiting on a lock (futex) during each sampling interval",
                             series.finish(model::counter_end(profile, proc, 0))});
  }
}

}  // namespace fxprof::model
