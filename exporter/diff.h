// fxprof exporter: comparing two profiles (`fxprof diff BASE NEW`).
//
// Profiles of two runs have unrelated ids, so functions are matched by name and call paths by their
// sequence of names. Shares are normalised by each profile's total samples: a run that recorded longer is
// not "slower everywhere". The table ranks functions by the change of their self share (then total share);
// the differential flame graph is NEW's flame graph (widths from NEW) with each box coloured by how much its
// path's share of samples changed from BASE: red grew, blue shrank, white unchanged or new.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "exporter/flamegraph_svg.h"
#include "model/profile.h"

namespace fxprof::exporter {

struct DiffRow {
  std::string name;
  double base_self = 0, new_self = 0, base_total = 0, new_total = 0;  // percent of each profile's samples
  double self_change() const { return new_self - base_self; }
  double total_change() const { return new_total - base_total; }
};

struct Diff {
  uint64_t base_samples = 0, new_samples = 0;
  std::vector<DiffRow> rows;  // every function of either profile, biggest change first
};

Diff diff_profiles(const model::Profile& base, const model::Profile& next, bool inlined = true);

// The table for the terminal: the first `limit` rows.
std::string format_diff(const Diff& diff, size_t limit);

// The differential flame graph. `options.tree` picks inlining and roots for both profiles.
Status write_diff_svg(const model::Profile& base, const model::Profile& next, const std::string& path,
                      SvgOptions options);

}  // namespace fxprof::exporter
