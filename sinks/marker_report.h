// fxprof sinks: `fxprof report --markers`: per program marker name (model/markers.h), how many intervals,
// their total and their p50/p90/p99/max durations, and the functions the samples inside those intervals
// (on the marker's thread) were in: on-CPU by self time (the leaf function), off-CPU by the function that
// waited (the innermost user-code function under the "[blocked: ...]" leaf).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/profile.h"
#include "sinks/output.h"

namespace fxprof::sinks {

struct MarkerFunction {
  std::string name;
  uint64_t samples = 0;
  double percent = 0;  // of the marker's on-CPU (or off-CPU) samples
};

struct MarkerStats {
  std::string name;
  uint64_t count = 0, instants = 0;  // intervals, instant markers
  double total_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
  uint64_t on_cpu_samples = 0, off_cpu_samples = 0;
  std::vector<MarkerFunction> on_cpu, off_cpu;  // at most `limit` each, by samples
};

struct MarkerReport {
  std::vector<MarkerStats> markers;  // by total time, descending
};

MarkerReport make_marker_report(const model::Profile& profile, size_t limit);
std::string format_marker_report(const MarkerReport& report);
void write_marker_report_json(const MarkerReport& report, JsonWriter& w);

}  // namespace fxprof::sinks
