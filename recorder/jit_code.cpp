// The JIT code tracker (jit_code.h): perf maps followed while recording, and each process's table read
// when it ends (recorder/jit.h).
#include "recorder/jit_code.h"

#include <sys/mman.h>
#include <unistd.h>

#include "recorder/quality.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

namespace {

// A JIT runtime announcing its jitdump file (names, not code) by mapping it.
bool is_jitdump(std::string_view path) { return !path.empty() && path[0] == '/' && jitdump_pid(path) != 0; }

}  // namespace

void JitTracker::on_attached_mapping(uint32_t pid, const MapsEntry& e, uint64_t) {
  if (is_jitdump(e.path)) procs_[pid].jitdump = e.path;
}

void JitTracker::on_mmap2(const Mmap2Record& m) {
  if (!(m.prot & PROT_EXEC)) return;
  if (is_anonymous_code(m.path)) {
    procs_[m.pid].anon_code = true;
    following_.insert(m.pid);
  }
  if (is_jitdump(m.path)) procs_[m.pid].jitdump = std::string(m.path);
}

void JitTracker::on_comm(const CommRecord& c) {
  if (!c.exec) return;
  auto it = procs_.find(c.pid);
  if (it == procs_.end()) return;
  it->second.jitdump.clear();
  it->second.perf_map.reset();
  it->second.anon_code = false;
}

void JitTracker::on_fork(const ForkRecord& f) {
  if (f.pid == f.ppid) return;
  auto parent = procs_.find(f.ppid);
  if (parent != procs_.end() && parent->second.anon_code) {
    procs_[f.pid].anon_code = true;
    following_.insert(f.pid);
  }
}

// Whose files may name a process's code: its real and effective users (from /proc while it is there; else
// fxprof's own user, perf's rule).
std::vector<uint32_t> JitTracker::file_owners(uint32_t pid) {
  std::vector<uint32_t> uids;
  if (auto status = c_.procfs.read("/proc/" + std::to_string(pid) + "/status")) uids = status_uids(*status);
  if (uids.empty()) uids.push_back(static_cast<uint32_t>(::geteuid()));
  return uids;
}

void JitTracker::tick(uint64_t now_ns) {
  for (auto pid_it = following_.begin(); pid_it != following_.end();) {
    const uint32_t pid = *pid_it;
    auto it = procs_.find(pid);
    if (it == procs_.end() || it->second.read || !it->second.anon_code) {  // read, or exec'd since
      pid_it = following_.erase(pid_it);
      continue;
    }
    ++pid_it;
    if (!c_.process_of(pid)) continue;  // only runtimes that generate code write maps
    JitProc& p = it->second;
    if (!p.perf_map) p.perf_map.emplace("/tmp/perf-" + std::to_string(pid) + ".map", file_owners(pid));
    p.perf_map->poll(now_ns);
  }
}

// The JIT map files now say all they will; the pid (and the file names) may be reused from now on.
void JitTracker::release(uint32_t pid, uint64_t, Release why) {
  if (why == Release::Exit) read(pid, procs_[pid]);
}

void JitTracker::finish() {
  // Processes still running. Their frames are named after every source finished (passes/passes.h).
  c_.for_each_process([&](uint32_t pid) { read(pid, procs_[pid]); });
}

void JitTracker::read(uint32_t pid, JitProc& p) {
  if (p.read) return;
  p.read = true;
  model::Process* proc = c_.process_of(pid);
  if (!proc || !has_samples(*proc)) return;
  // Not followed (no JIT mapping seen, or a replayed capture): read whole now, its lines from the start.
  const std::vector<uint32_t> uids = file_owners(pid);
  if (!p.perf_map) p.perf_map.emplace("/tmp/perf-" + std::to_string(pid) + ".map", uids);
  std::vector<model::JitCode> map = p.perf_map->finish();
  std::string source = map.empty() ? "" : p.perf_map->path();
  if (!p.perf_map->untrusted().empty()) c_.refused_files.push_back(p.perf_map->untrusted());
  if (!p.perf_map->dropped().empty()) c_.jit_dropped.push_back(p.perf_map->dropped());
  p.perf_map.reset();
  std::vector<model::JitCode> dump;
  if (!p.jitdump.empty()) {
    std::string untrusted;
    auto d = read_jitdump(p.jitdump, uids, &untrusted);
    if (!untrusted.empty()) c_.refused_files.push_back(std::move(untrusted));
    if (d && !d->empty()) {
      dump = std::move(*d);
      source = p.jitdump;
    }
  }
  if (map.empty() && dump.empty()) return;
  proc->jit = merge_jit_sources(std::move(map), std::move(dump));
  proc->jit_source = std::move(source);
  c_.counts.jit_functions += proc->jit.size();
}

}  // namespace fxprof::recorder
