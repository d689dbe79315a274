// fxprof sinks: comparing two profiles (`fxprof diff BASE NEW`).
//
// Profiles of two runs have unrelated ids, so functions are matched by name and call paths by their
// sequence of names. Shares are normalised by each profile's total samples: a run that recorded longer is
// not "slower everywhere". The table ranks functions by the change of their self share (then total share);
// the differential flame graph is NEW's flame graph (widths from NEW) with each box coloured by how much its
// path's share of samples changed from BASE: red grew, blue shrank, white unchanged or new.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/profile.h"
#include "sinks/flamegraph_svg.h"

namespace fxprof::sinks {

// With several runs per side, shares are the mean over the side's runs and each spread is the range
// (max - min) of that share across the side's runs: how far runs of the same code disagree. Each share is
// also an estimate from a finite number of samples: `*_margin` is the half-width of the 95% interval of the
// change (two binomial shares, in points), so that one run per side is not "spread 0".
struct DiffRow {
  std::string name;
  double base_self = 0, new_self = 0, base_total = 0, new_total = 0;  // percent of each profile's samples
  double base_self_spread = 0, new_self_spread = 0, base_total_spread = 0, new_total_spread = 0;
  // The sampling error of self_change() and total_change(), plus the lost records' bounds (Diff).
  double self_margin = 0, total_margin = 0;
  double self_change() const { return new_self - base_self; }
  double total_change() const { return new_total - base_total; }
  double self_noise() const {
    return base_self_spread > new_self_spread ? base_self_spread : new_self_spread;
  }
  double total_noise() const {
    return base_total_spread > new_total_spread ? base_total_spread : new_total_spread;
  }
};

struct Diff {
  uint64_t base_samples = 0, new_samples = 0;  // summed over each side's runs
  // Records the kernel dropped (a full ring buffer), summed over each side's runs, and how far they can
  // have moved that side's shares: each was at most one sample, of any function, so a share of a run that
  // lost L records beside N samples is off by at most 100 L / (N + L) points (the mean over the side's
  // runs). The margins below include both sides' bounds: a lossy profile widens the gate, never fails it.
  uint64_t base_lost = 0, new_lost = 0;
  double base_lost_bound = 0, new_lost_bound = 0;
  size_t base_runs = 1, new_runs = 1;
  Clock clock = Clock::Cpu;
  std::vector<DiffRow> rows;  // every function of either profile, biggest change first
};

// `clock`: Cpu (the default) compares on-CPU samples; Program (diff --wall) on-CPU and blocked ones. Never
// Wall: a preempted thread waited for the machine, and that share moves with the runner's load.
Diff diff_profiles(const model::Profile& base, const model::Profile& next, bool inlined = true,
                   Clock clock = Clock::Cpu);
Diff diff_runs(std::span<const model::Profile> base, std::span<const model::Profile> next,
               bool inlined = true, Clock clock = Clock::Cpu);

// The table for the terminal: the first `limit` rows (with a spread column when a side has several runs).
std::string format_diff(const Diff& diff, size_t limit);
// The same table in Markdown, for a pull-request comment; `verdict` (the gate's line) goes above it.
std::string format_diff_markdown(const Diff& diff, size_t limit, const std::string& verdict);

// The CI gate (`fxprof diff --fail-above P`): the rows whose self share (or, with `function` set, that
// function's total share) grew by more than `threshold` percentage points beyond the sampling margin (the
// 95% interval of the change) and by more than the spread of either side's runs (noise: runs of the same
// code disagree that much). Empty: the gate passes. `function` matches a row's whole name, or its bare name
// (without namespace, parameters or template arguments: "hash_block" finds "app::hash_block(char const*)").
std::vector<const DiffRow*> gate_failures(const Diff& diff, double threshold, const std::string& function);
// Whether `name` (a demangled signature) is `query`, written in full or bare.
bool function_matches(std::string_view name, std::string_view query);

// The differential flame graph. `options.tree` picks inlining and roots for both profiles.
Status write_diff_svg(const model::Profile& base, const model::Profile& next, const std::string& path,
                      SvgOptions options);

}  // namespace fxprof::sinks
