// fxprof sinks: the heap report (`fxprof report --heap`, the heap lines after `fxprof record --heap`, and
// their JSON form): what heaptrack_print answers, computed from a profile's allocation rows and its
// meta.fxprofHeap (model::Meta::HeapStats): allocations and bytes, the peak and the call paths that held it,
// bytes leaked (still allocated at the end) by site, temporary allocations, the sites that allocate most by
// bytes and by count, and a histogram of sizes.
//
// A site is the first function outside the allocator's libraries (libc, libstdc++, libgcc_s, ld.so, fxprof's
// shim) and Rust's allocator shims (alloc::alloc::*, __rust_alloc...), named "function (lib)" as the summary
// always did; sites of one name add up, and each keeps the call path (site first, then its callers) of the
// stack that contributed most to it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "model/profile.h"

namespace fxprof::sinks {

struct HeapSite {
  std::string name;
  int64_t bytes = 0;
  uint64_t count = 0;                  // blocks
  std::vector<std::string> call_path;  // the site, then its callers (at most 24)
};

struct HeapReport {
  bool sampled = false;  // figures are estimates (Poisson samples, one per rate_bytes on average)
  double rate_bytes = 0;
  uint64_t allocations = 0;  // sampled: samples
  int64_t bytes_allocated = 0;
  uint64_t frees = 0;
  int64_t peak_bytes = 0;
  double peak_time_ms = 0;  // since the recording started
  // Sampled: the samples held at the peak, and the peak's 95% interval. From 64 samples on it is the
  // symmetric +- of every estimate; below, the peak is the plain highest point of a noisy curve (the
  // cross-fitted one is too thin, heap/source_fold.cpp), and its interval is wide and lopsided
  // (peak_interval() in heap_report.cpp).
  uint64_t peak_samples = 0;
  int64_t peak_low = 0, peak_high = 0;
  int64_t leaked_bytes = 0;
  uint64_t leaked_blocks = 0;
  uint64_t temporary = 0;
  uint64_t temporary_error = 0;  // sampled: one standard error of the estimated count
  std::vector<HeapSite> top_leak_sites, top_alloc_sites, top_count_sites, peak_sites;  // at most `limit`
  std::vector<model::Meta::HeapStats::SizeBin> sizes;
  // --suppress: the blocks left out (set by the caller, sinks/heap_diff.h suppress_allocations), and the
  // functions named. The peak's bytes, the temporary count and the sizes are the recording's, of every block.
  uint64_t suppressed_allocations = 0;
  int64_t suppressed_bytes = 0;
  std::vector<std::string> suppressed_functions;
};

// False when the profile holds no allocations (nothing recorded with --heap).
bool has_heap_data(const model::Profile& profile);
HeapReport make_heap_report(const model::Profile& profile, size_t limit);
// `report --heap`: every section.
std::string format_heap_report(const HeapReport& r);
// After `record --heap`: the headline figures and the top `sites` leak sites.
std::string format_heap_summary(const HeapReport& r, size_t sites);
// "12.0 MiB", "512 B".
std::string heap_bytes_text(int64_t bytes);
// Sampled mode: the half-width of the 95% interval of an estimated total of `total` bytes at `rate`.
int64_t heap_sampling_error(int64_t total, double rate);
// The `heap` object of `report --heap --json`.
void write_heap_report_json(const HeapReport& r, JsonWriter& w);

}  // namespace fxprof::sinks
