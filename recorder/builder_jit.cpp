// The profile builder's JIT part (builder.h): perf maps followed while recording, and each process's
// table read when it ends (recorder/jit.h).
#include "model/symbols.h"
#include "recorder/builder.h"

namespace fxprof::recorder {

void ProfileBuilder::follow_jit_maps(uint64_t now_ns) {
  for (auto& [pid, pr] : procs_) {
    if (pr.jit_read || pr.anon_code.empty()) continue;  // only runtimes that generate code write maps
    if (!pr.perf_map) pr.perf_map.emplace("/tmp/perf-" + std::to_string(pid) + ".map");
    pr.perf_map->poll(now_ns);
  }
}

void ProfileBuilder::read_jit(uint32_t pid, ProcRef& pr) {
  if (pr.jit_read) return;
  pr.jit_read = true;
  model::Process& proc = profile_.processes[pr.proc];
  if (!has_samples(proc)) return;
  // Not followed (no JIT mapping seen, or a replayed capture): read whole now, its lines from the start.
  if (!pr.perf_map) pr.perf_map.emplace("/tmp/perf-" + std::to_string(pid) + ".map");
  std::vector<model::JitCode> map = pr.perf_map->finish();
  std::string source = map.empty() ? "" : pr.perf_map->path();
  pr.perf_map.reset();
  std::vector<model::JitCode> dump;
  if (!pr.jitdump.empty()) {
    if (auto d = read_jitdump(pr.jitdump); d && !d->empty()) {
      dump = std::move(*d);
      source = pr.jitdump;
    }
  }
  if (map.empty() && dump.empty()) return;
  proc.jit = merge_jit_sources(std::move(map), std::move(dump));
  proc.jit_source = std::move(source);
  jit_functions_ += proc.jit.size();
}

}  // namespace fxprof::recorder
