// fxprof heap recorder internals (heap/source.cpp): where finish() puts the events in the profile (process
// and thread entries, the Memory counter), and the encoding of calls recorded outside the shim
// (heap/external.cpp) into the shim's stream format. (The tables finish() matches frees with: heap/tables.h.)
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
    uint64_t last_alloc = 0;  // the address the thread allocated last (temporaries)
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

// The Memory counter: one sample per process and 1 ms bucket with the bucket's change; a bucket whose highest
// point lies above both its ends is written as two samples (up to the high, then down from it), so that the
// track's maximum is the process's exact peak however briefly it was held.
class Counters {
 public:
  explicit Counters(model::Profile& prof) : prof_(prof) {}
  void add(uint32_t proc, uint64_t t, int64_t d) {
    State& c = state_[proc];
    uint64_t bucket = t / 1000000;
    if (c.bucket != bucket) {
      flush(proc, c);
      c.bucket = bucket;
      c.high = c.written;
      c.high_count = 0;
    }
    c.value += d;
    ++c.count;
    c.last_time = t;
    if (c.value > c.high) {
      c.high = c.value;
      c.high_count = c.count;
    }
  }
  void finish() {
    for (auto& [proc, c] : state_) {
      flush(proc, c);
      // The last value holds to the process's end (or the recording's), as the RSS track's does: the track
      // does not stop at the last allocation or free.
      const model::Process& p = prof_.processes[proc];
      const uint64_t end = p.end_ns ? *p.end_ns : prof_.meta.end_monotonic_ns.value_or(0);
      for (model::Counter& k : prof_.processes[proc].counters)
        if (k.name == "Heap" && !k.samples.empty() && end > k.samples.back().time_ns)
          k.samples.push_back({end, 0, 0});
    }
  }

 private:
  struct State {
    uint64_t bucket = UINT64_MAX;
    int64_t value = 0;    // the process's heap bytes after its last event
    int64_t written = 0;  // what the samples written so far add up to
    int64_t high = 0;     // the bucket's highest value, reached after high_count of its count events
    uint64_t high_count = 0, count = 0, last_time = 0;
  };
  void flush(uint32_t proc, State& c) {
    if (c.count == 0) return;
    auto& samples = prof_.processes[proc].counters;
    auto it = std::find_if(samples.begin(), samples.end(),
                           [](const model::Counter& k) { return k.name == "Heap"; });
    if (it == samples.end()) {
      samples.push_back({"Heap", "Memory", "Heap bytes in use (fxprof --heap)", {}});
      it = samples.end() - 1;
    }
    const uint64_t start_ns = c.bucket * 1000000;
    if (c.high > c.written && c.high > c.value) {
      it->samples.push_back({start_ns, c.high - c.written, c.high_count});
      it->samples.push_back({std::max(c.last_time, start_ns + 1), c.value - c.high, c.count - c.high_count});
    } else {
      it->samples.push_back({start_ns, c.value - c.written, c.count});
    }
    c.written = c.value;
    c.count = 0;
  }
  model::Profile& prof_;
  std::map<uint32_t, State> state_;  // process index -> its counter's state
};

}  // namespace internal

// `calls` as chunks of the shim's stream (heap/wire.h), so that they become the same events: every call in
// full mode; in sampled mode the same Poisson sampling by bytes as the shim (a countdown per thread, mean
// `rate` bytes), frees of sampled blocks only, a free marked temporary when its thread allocated nothing
// since.
std::vector<std::byte> external_chunks(std::span<const ExternalCall> calls, Mode mode, double rate);

}  // namespace fxprof::heap
