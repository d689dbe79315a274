// fxprof sinks: the heap of two profiles compared (`fxprof diff --heap BASE NEW`), and suppressions
// (`--suppress FUNC` of report, export and diff with --heap: heaptrack_print's --suppressions, DHAT users'
// "ignore this allocator wrapper").
//
// The heap diff speaks of sites as `report --heap` does (sinks/heap_report.h: the first function outside
// the allocator's libraries, "function (lib)"), matched by name across the two runs: per site, bytes and
// blocks allocated and leaked in each profile, ranked by the larger change of the two. Its gate compares
// bytes, not shares: a heap is the program's, not the machine's, so two runs of the same code allocate the
// same bytes (full mode: exactly), and growth is measured against BASE's bytes allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/profile.h"

namespace fxprof::sinks {

struct Suppressed {
  uint64_t allocations = 0;  // blocks (sampled profiles: samples)
  int64_t bytes = 0;
  uint64_t rows = 0;  // allocation and free rows removed
};

// Removes the allocation rows (and their free rows) whose stack contains one of `functions`, named in full
// or bare (sinks/diff.h function_matches), from every thread of a symbolicated profile.
Suppressed suppress_allocations(model::Profile& profile, std::span<const std::string> functions);

struct HeapDiffRow {
  std::string name;
  int64_t base_bytes = 0, new_bytes = 0, base_leaked = 0, new_leaked = 0;
  uint64_t base_count = 0, new_count = 0, base_leaked_count = 0, new_leaked_count = 0;
  // Sampled profiles: the half-width of the 95% interval of each change (0 in full mode).
  int64_t bytes_margin = 0, leaked_margin = 0;
  int64_t bytes_change() const { return new_bytes - base_bytes; }
  int64_t leaked_change() const { return new_leaked - base_leaked; }
};

struct HeapDiff {
  bool sampled = false;  // either side
  int64_t base_bytes = 0, new_bytes = 0, base_leaked = 0, new_leaked = 0;
  uint64_t base_count = 0, new_count = 0;
  std::vector<HeapDiffRow> rows;  // every site of either profile, biggest change first
};

HeapDiff diff_heaps(const model::Profile& base, const model::Profile& next);
std::string format_heap_diff(const HeapDiff& d, size_t limit);

// The gate of `diff --heap --fail-above P`: the rows (with `function` set, that function's row only) whose
// bytes allocated or bytes leaked grew by more than P% of BASE's bytes allocated beyond the sampling margin.
std::vector<const HeapDiffRow*> heap_gate_failures(const HeapDiff& d, double percent,
                                                   const std::string& function);

}  // namespace fxprof::sinks
