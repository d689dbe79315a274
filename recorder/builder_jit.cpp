// The profile builder's JIT part (builder.h): perf maps followed while recording, and each process's
// table read when it ends (recorder/jit.h).
#include <unistd.h>

#include "model/symbols.h"
#include "recorder/builder.h"
#include "recorder/quality.h"

namespace fxprof::recorder {

// Whose files may name a process's code: its real and effective users (from /proc while it is there; else
// fxprof's own user, perf's rule).
std::vector<uint32_t> ProfileBuilder::jit_file_owners(uint32_t pid) {
  std::vector<uint32_t> uids;
  if (auto status = procfs_.read("/proc/" + std::to_string(pid) + "/status")) uids = status_uids(*status);
  if (uids.empty()) uids.push_back(static_cast<uint32_t>(::geteuid()));
  return uids;
}

void ProfileBuilder::follow_jit_maps(uint64_t now_ns) {
  for (auto& [pid, pr] : procs_) {
    if (pr.jit_read || pr.anon_code.empty()) continue;  // only runtimes that generate code write maps
    if (!pr.perf_map) pr.perf_map.emplace("/tmp/perf-" + std::to_string(pid) + ".map", jit_file_owners(pid));
    pr.perf_map->poll(now_ns);
  }
}

void ProfileBuilder::read_jit(uint32_t pid, ProcRef& pr) {
  if (pr.jit_read) return;
  pr.jit_read = true;
  model::Process& proc = profile_.processes[pr.proc];
  if (!has_samples(proc)) return;
  // Not followed (no JIT mapping seen, or a replayed capture): read whole now, its lines from the start.
  const std::vector<uint32_t> uids = jit_file_owners(pid);
  if (!pr.perf_map) pr.perf_map.emplace("/tmp/perf-" + std::to_string(pid) + ".map", uids);
  std::vector<model::JitCode> map = pr.perf_map->finish();
  std::string source = map.empty() ? "" : pr.perf_map->path();
  if (!pr.perf_map->untrusted().empty()) jit_refused_.push_back(pr.perf_map->untrusted());
  pr.perf_map.reset();
  std::vector<model::JitCode> dump;
  if (!pr.jitdump.empty()) {
    std::string untrusted;
    auto d = read_jitdump(pr.jitdump, uids, &untrusted);
    if (!untrusted.empty()) jit_refused_.push_back(std::move(untrusted));
    if (d && !d->empty()) {
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
