// The passes of a profile, as one ordered list (passes.h).
#include "passes/passes.h"

#include <algorithm>
#include <chrono>

#include "model/symbols.h"
#include "passes/kernel_time.h"
#include "passes/locks.h"

namespace fxprof::passes {
namespace {

struct Context {
  model::Profile& profile;
  const Options& options;
  Outcome& out;
};

void jit_names(Context& c) { model::name_jit_frames(c.profile); }

void kernel_time(Context& c) { categorize_kernel_time(c.profile); }

void symbols(Context& c) { c.out.named = symbolicate(c.profile, *c.options.symbols); }

void locks(Context& c) {
  // A program's own lock wrappers are told by their code, read through the same symbolizer.
  LockCode code(c.options.symbols);
  if (c.options.naming == Naming::Baked) {
    add_lock_holders(c.profile, &code);
    return;
  }
  // Served with raw addresses: "Held by" is a marker field, written now; only the Wakeup and Lock wait
  // stacks are named for it, the file keeps its addresses.
  add_lock_holders_unsymbolicated(
      c.profile,
      [&](model::Profile& wakes) {
        c.out.named = symbolicate(wakes, *c.options.symbols);
        // The debug files found missing on the way are the profile's: kept in its data quality.
        for (const model::Meta::Problem& q : wakes.meta.data_quality) c.profile.meta.add_problem(q);
      },
      code);
}

// Taken from the back of each process's threads, so the indices of those before stay valid.
void source_tracks(Context& c) {
  std::vector<std::pair<size_t, size_t>> at = c.options.source_tracks;
  std::sort(at.begin(), at.end());
  std::vector<model::SyntheticThread> taken;
  for (auto it = at.rbegin(); it != at.rend(); ++it) {
    std::vector<model::Thread>& threads = c.profile.processes[it->first].threads;
    taken.push_back({it->first, std::move(threads[it->second])});
    threads.erase(threads.begin() + static_cast<std::ptrdiff_t>(it->second));
  }
  c.out.tracks.insert(c.out.tracks.end(), std::make_move_iterator(taken.rbegin()),
                      std::make_move_iterator(taken.rend()));
}

void critical_path(Context& c) {
  const double interval_ms = std::max(c.profile.meta.interval_ms, 0.001);
  for (model::SyntheticThread& t :
       model::critical_path_tracks(c.profile, static_cast<uint64_t>(interval_ms * 1e6)))
    c.out.tracks.push_back(std::move(t));
}

bool always(const Options&) { return true; }
bool baked(const Options& o) { return o.naming == Naming::Baked && o.symbols; }
bool named(const Options& o) { return o.naming != Naming::Raw && o.symbols; }
bool tracks(const Options& o) { return o.tracks; }
bool from_source(const Options& o) { return !o.source_tracks.empty(); }

struct Pass {
  const char* name;
  bool (*wanted)(const Options&);
  void (*run)(Context&);
};

// The list, in the order the passes run: each one may use what those above it made (names for the lock
// holders; classified waits for the critical path).
// clang-format off
constexpr Pass kPasses[] = {
    {"jit names", always, jit_names},
    {"kernel time", always, kernel_time},
    {"symbols", baked, symbols},
    {"locks", named, locks},
    {"source tracks", from_source, source_tracks},
    {"critical path", tracks, critical_path},
};
// clang-format on

}  // namespace

Outcome run(model::Profile& profile, const Options& options) {
  Outcome out;
  Context c{profile, options, out};
  for (const Pass& p : kPasses) {
    if (!p.wanted(options)) continue;
    const auto t0 = std::chrono::steady_clock::now();
    p.run(c);
    out.ms.emplace_back(
        p.name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return out;
}

Options with_tracks(model::Profile& profile, std::vector<std::pair<size_t, model::Thread>>& kept, Options o) {
  if (kept.empty()) return o;
  for (auto& [proc, t] : kept) {
    std::vector<model::Thread>& threads = profile.processes[proc].threads;
    threads.push_back(std::move(t));
    o.source_tracks.emplace_back(proc, threads.size() - 1);
  }
  kept.clear();
  o.tracks = false;
  return o;
}

SymbolicateStats name_frames(model::Profile& profile, symbolizer::Symbolizer& symbols) {
  const Options o{&symbols, Naming::Baked, false};
  return run(profile, o).named;
}

}  // namespace fxprof::passes
