// The critical-path tracks `fxprof record` writes (model/critical_path.h).
#include <algorithm>
#include <set>

#include "model/critical_path.h"
#include "model/markers.h"

namespace fxprof::model {

namespace {

// The thread of `proc` that used the most CPU, else has the most samples; nullptr without threads.
const Thread* busiest(const Process& proc) {
  const Thread* best = nullptr;
  int64_t best_cpu = -1;
  for (const Thread& t : proc.threads) {
    int64_t cpu = 0;
    for (const Sample& s : t.samples) cpu += std::max<int64_t>(s.cpu_delta_ns, 0);
    if (!best || cpu > best_cpu || (cpu == best_cpu && t.samples.size() > best->samples.size())) {
      best = &t;
      best_cpu = cpu;
    }
  }
  return best;
}

// One thread of the paths over several intervals, in time order.
Thread joined(Profile& p, const std::vector<CriticalPath>& paths, std::string_view name,
              uint64_t interval_ns) {
  Thread out;
  for (const CriticalPath& path : paths) {
    Thread part = critical_path_thread(p, path, name, interval_ns);
    if (out.name.empty())
      out = std::move(part);
    else
      out.samples.insert(out.samples.end(), part.samples.begin(), part.samples.end());
  }
  return out;
}

// Whether the path went through another thread (else it is the thread's own samples again: no track).
bool left_thread(const CriticalPath& path) {
  return std::any_of(path.segments.begin(), path.segments.end(),
                     [](const PathSegment& s) { return s.hops > 0; });
}

}  // namespace

std::pair<uint64_t, uint64_t> thread_span(const Thread& t) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const Sample& s : t.samples) {
    lo = std::min(lo, s.time_ns);
    hi = std::max(hi, s.time_ns);
  }
  for (const Wait& w : t.waits) {
    lo = std::min(lo, w.start_ns);
    hi = std::max(hi, w.end_ns);
  }
  return {lo == UINT64_MAX ? 0 : lo, hi};
}

std::vector<SyntheticThread> critical_path_tracks(Profile& p, uint64_t interval_ns) {
  std::vector<SyntheticThread> tracks;
  if (interval_ns == 0) return tracks;
  for (size_t i = 0; i < p.processes.size(); ++i) {
    const Process& proc = p.processes[i];
    const bool waited = std::any_of(proc.threads.begin(), proc.threads.end(),
                                    [](const Thread& t) { return !t.waits.empty(); });
    const Thread* t = waited ? busiest(proc) : nullptr;
    if (!t) continue;
    const auto [lo, hi] = thread_span(*t);
    const CriticalPath path = critical_path(p, proc, *t, lo, hi);
    if (left_thread(path)) tracks.push_back({i, critical_path_thread(p, path, t->name, interval_ns)});
    std::set<StringId> names;
    for (const MarkerInterval& m : program_intervals(*t))
      if (names.size() < kMarkerTracks) names.insert(m.name);
    for (StringId name : names) {
      std::vector<CriticalPath> paths;
      bool left = false;
      for (const MarkerInterval& m : program_intervals(*t, name)) {
        paths.push_back(critical_path(p, proc, *t, m.start_ns, m.end_ns));
        left |= left_thread(paths.back());
      }
      if (!left) continue;
      Thread track = joined(p, paths, t->name + ": " + std::string(p.strings.get(name)), interval_ns);
      if (!track.samples.empty()) tracks.push_back({i, std::move(track)});
    }
  }
  return tracks;
}

}  // namespace fxprof::model
