// fxprof sinks: the terminal report (`fxprof report`, the summary after `fxprof record`) and its JSON
// form.
//
// Sections are per process, or per thread with `per_thread`; each lists the top functions by self share and
// by total share (a recursive function counts once per sample in its total, as in the Firefox Profiler's
// function list), and optionally the top-down call tree in the spirit of `perf report --stdio` (children
// sorted by samples, branches under `tree_min_percent` of the section left out). Lost records come from the
// recorder's "Lost records" markers, unwind failures from "(stack truncated)" frames in sampled stacks.
// Everything is computed from one call tree (sinks/call_tree.h) with per-thread or per-process roots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/profile.h"
#include "sinks/functions.h"
#include "sinks/output.h"

namespace fxprof::sinks {

struct ReportOptions {
  bool per_thread = false;        // --threads: one section per thread instead of per process
  bool inlined = true;            // --inline / --no-inline
  size_t limit = 10;              // --limit: functions per table
  bool tree = false;              // --tree: the call tree of each section
  double tree_min_percent = 0.5;  // of the section's samples
  Clock clock = Clock::Cpu;       // on-CPU samples (default) or every sample (--wall)
};

struct ReportFunction {
  std::string name;
  uint64_t self = 0, total = 0;
  double self_percent = 0, total_percent = 0;  // of the section's samples
};

struct ReportTreeNode {
  std::string name;
  uint64_t self = 0, total = 0;
  std::vector<ReportTreeNode> children;  // by samples, descending
};

struct ReportSection {
  std::string process_name;
  uint32_t pid = 0;
  std::string thread_name;  // empty for a per-process section
  uint32_t tid = 0;
  uint64_t samples = 0;
  uint64_t cpu_ns = 0;
  std::vector<ReportFunction> by_self, by_total;  // at most `limit` each
  std::vector<ReportTreeNode> tree;               // roots of the call tree with --tree
  WallTime wall;                                  // its wall-clock samples and their off-CPU reasons
};

struct Report {
  uint64_t samples = 0;  // with a stack, counted by the clock asked for
  Clock clock = Clock::Cpu;
  WallTime wall;  // every sample with a stack, and the off-CPU ones by reason
  uint64_t samples_without_stack = 0;
  uint64_t lost_records = 0;
  uint64_t truncated_stacks = 0;  // samples whose stack ends in "(stack truncated)"
  uint32_t threads = 0, processes = 0;
  std::vector<model::Meta::Problem> data_quality;  // the recording's data-quality entries (meta)
  model::Meta::Machine machine;                    // the machine and the command recorded (meta)
  std::string oscpu;
  std::vector<ReportSection> sections;  // by samples, descending; sections without samples left out
};

Report make_report(const model::Profile& profile, const ReportOptions& options);

// Human-readable, for a terminal (no colours: it goes to CI logs as well).
std::string format_report(const Report& report, const ReportOptions& options);
void write_report_json(const Report& report, JsonWriter& w);

// "main 41.2%, compute 30.1%, ... (on-CPU); blocked: futex 28.0%, preempted 12.0% of wall time": the top `n`
// functions by self share of the whole profile's on-CPU samples, then the off-CPU time by reason, for the
// summary line after recording; "" when there are no samples.
std::string top_self_summary(const model::Profile& profile, size_t n);

}  // namespace fxprof::sinks
