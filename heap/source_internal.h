// fxprof heap recorder internals: where the rows and counters go in the profile (process and thread entries,
// heap/source_fold.cpp), and the encoding of calls recorded outside the shim (heap/external.cpp) into the
// shim's stream format. (The fold of the events: heap/source_fold.h; its tables: heap/tables.h.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "heap/heap.h"
#include "model/profile.h"

namespace fxprof::heap {

namespace internal {

// The process entry `pid` had at time `t` (exec gives a pid a new entry), created if perf never saw it.
inline uint32_t process_for(model::Profile& prof, uint32_t pid, uint64_t t) {
  int best = -1;
  for (size_t i = 0; i < prof.processes.size(); ++i) {
    const auto& p = prof.processes[i];
    if (p.pid != pid) continue;
    if (best < 0 || (p.start_ns <= t && p.start_ns >= prof.processes[static_cast<size_t>(best)].start_ns))
      best = static_cast<int>(i);
  }
  if (best >= 0) return static_cast<uint32_t>(best);
  model::Process p;
  p.pid = pid;
  p.name = "pid " + std::to_string(pid);
  p.start_ns = t;
  prof.processes.push_back(std::move(p));
  return static_cast<uint32_t>(prof.processes.size() - 1);
}

inline uint32_t thread_for(model::Process& proc, uint32_t tid, uint64_t t) {
  for (size_t i = 0; i < proc.threads.size(); ++i)
    if (proc.threads[i].tid == tid) return static_cast<uint32_t>(i);
  model::Thread th;
  th.tid = tid;
  th.name = tid == proc.pid ? proc.name : "thread " + std::to_string(tid);
  th.is_main = tid == proc.pid;
  th.start_ns = std::min(t, proc.start_ns);
  proc.threads.push_back(std::move(th));
  return static_cast<uint32_t>(proc.threads.size() - 1);
}

// The (process, thread) indices of a recorded (pid, tid) at a time, cached per (pid, tid) until the next
// exec of that pid (process_for's linear search per event was most of finish() with millions of events).
class ThreadCache {
 public:
  struct Entry {
    bool valid = false;
    uint32_t proc = 0, thread = 0;
    uint64_t from = 0, until = 0;
  };
  explicit ThreadCache(model::Profile& prof) : prof_(prof) {}
  // The thread's entry; the last one asked for is remembered (events come in runs of one thread).
  Entry& entry(uint32_t pid, uint32_t tid) {
    const uint64_t key = uint64_t{pid} << 32 | tid;
    if (last_ && last_key_ == key) return *last_;
    last_key_ = key;
    last_ = &cache_[key];  // unordered_map: entries stay where they are
    return *last_;
  }
  std::pair<uint32_t, uint32_t> get(uint32_t pid, uint32_t tid, uint64_t t) {
    Entry& e = entry(pid, tid);
    if (e.valid && t >= e.from && t < e.until) return {e.proc, e.thread};
    e.proc = process_for(prof_, pid, t);
    e.thread = thread_for(prof_.processes[e.proc], tid, t);
    e.from = std::min(t, prof_.processes[e.proc].start_ns);
    e.until = UINT64_MAX;  // the next entry of the same pid (an exec) ends this one's range
    for (const model::Process& p : prof_.processes)
      if (p.pid == pid && p.start_ns > prof_.processes[e.proc].start_ns)
        e.until = std::min(e.until, p.start_ns);
    e.valid = true;
    return {e.proc, e.thread};
  }

 private:
  model::Profile& prof_;
  std::unordered_map<uint64_t, Entry> cache_;
  uint64_t last_key_ = 0;
  Entry* last_ = nullptr;
};

}  // namespace internal

// `calls` as chunks of the shim's stream (heap/wire.h), so that they become the same events: every call in
// full mode; in sampled mode the same Poisson sampling by bytes as the shim (a countdown per thread, mean
// `rate` bytes), frees of sampled blocks only, a free marked temporary when its thread allocated nothing
// since.
std::vector<std::byte> external_chunks(std::span<const ExternalCall> calls, Mode mode, double rate);

}  // namespace fxprof::heap
