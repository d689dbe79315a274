// fxprof counters: `fxprof stat --cache-sim`, simulated caches where no PMU counts the real ones.
//
// Runs the program under Cachegrind (`valgrind --tool=cachegrind --cache-sim=yes`, Debian's valgrind), which
// simulates an I1, a D1 and a last-level cache shaped like this machine's on every instruction and memory
// access, and reads its output file: the miss rates in total and the functions with the most D1 and LL
// misses. It is a simulation (no prefetchers, no other processes, one thread at a time) and the program runs
// 20-100x slower, both said up front.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace fxprof::counters {

struct CacheCounts {
  // Cachegrind's events: instruction reads, data reads and writes, and their I1/D1/LL misses.
  uint64_t ir = 0, i1mr = 0, ilmr = 0, dr = 0, d1mr = 0, dlmr = 0, dw = 0, d1mw = 0, dlmw = 0;
  uint64_t d1_misses() const { return d1mr + d1mw; }
  uint64_t ll_misses() const { return ilmr + dlmr + dlmw; }
};

struct FunctionCache {
  std::string name, file;
  CacheCounts counts;
};

struct CacheSim {
  std::vector<std::string> command;
  std::vector<std::string> caches;  // Cachegrind's "I1 cache: 32768 B, 64 B, 8-way associative" lines
  CacheCounts total;
  std::vector<FunctionCache> functions;  // every function with counts, unsorted
  double elapsed_s = 0;
  int exit_status = 0;
};

// Parses a cachegrind.out file (events line, fl=/fn= sections, summary).
Result<CacheSim> parse_cachegrind(const std::string& text);

// Runs `command` under Cachegrind (valgrind from PATH) and parses its output. An exec failure of valgrind
// is an error naming the package; the program's own failure is its exit status.
// `ll_bytes`: simulate a last-level cache of that size (16-way, 64-byte lines) instead of the one Cachegrind
// derives from this machine (a cloud host's shared L3 can be hundreds of MiB); 0: the machine's.
Result<CacheSim> run_cache_sim(const std::vector<std::string>& command, uint64_t ll_bytes = 0);

// The text report (simulated rates, top `limit` functions by D1 and by LL misses) and the JSON one.
std::string format_cache_sim(const CacheSim& c, size_t limit = 10);
std::string format_cache_sim_json(const CacheSim& c, size_t limit = 10);

}  // namespace fxprof::counters
