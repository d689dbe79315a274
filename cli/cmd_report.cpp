// `fxprof report IN`: where the time went, in the terminal (SSH sessions, CI logs) or as JSON for scripts.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/critical_path.h"
#include "cli/options.h"
#include "cli/profile_input.h"
#include "sinks/critical_path_report.h"
#include "sinks/heap_report.h"
#include "sinks/marker_report.h"
#include "sinks/output.h"
#include "sinks/report.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof report [OPTIONS] IN\n"
    "\n"
    "Prints the top functions of the saved profile IN by self and by total share of on-CPU samples (--wall:\n"
    "of every sample), per process (or per thread), with the off-CPU time by reason beside them, lost\n"
    "records, unwind failures and the recording's data-quality entries; symbolicated on the way.\n"
    "\n";

constexpr std::string_view kCommand = "report";

// What report's command line says.
struct ReportArgs {
  InputOptions input;
  sinks::ReportOptions opts;
  bool json = false, heap = false, markers = false;
  CriticalPathOptions critical;
  bool wait_blame = false, include_irq = false;  // --wait-blame walks the path as --critical-path does
  std::string in;
};

// Parses the arguments: nullopt to go on, else the exit status (after --help or an error, printed).
std::optional<int> parse_report_args(std::span<char*> args, ReportArgs& a) {
  sinks::ReportOptions& opts = a.opts;
  Command command{
      kCommand,
      kUsage,
      {
          {"-i", "--input", "IN", "the profile (as perf report -i; or give IN as the operand)",
           one_operand(a.in, "profile")},
          {"", "--cpu-only", "", "shares of on-CPU samples; off-CPU time by reason beside them (the default)",
           set(opts.clock, sinks::Clock::Cpu)},
          {"", "--wall", "", "shares of wall-clock samples: on the CPU, blocked and preempted",
           set(opts.clock, sinks::Clock::Wall)},
          {"", "--threads", "", "a section per thread instead of per process", set(opts.per_thread, true)},
          {"", "--inline", "", "inlined functions count as functions of their own (the default)",
           set(opts.inlined, true)},
          {"", "--no-inline", "", "inlined functions count as the function they were inlined into",
           set(opts.inlined, false)},
          limit_option(opts.limit, "functions per table (default 10)"),
          {"", "--tree", "", "also print the top-down call tree (like perf report --stdio)",
           set(opts.tree, true)},
          {"", "--min-percent", "P", "leave out call-tree branches under P% of the section (default 0.5)",
           number("--min-percent", {0, 100, "a percentage"}, [&](double n) { opts.tree_min_percent = n; })},
          {"", "--heap", "",
           "the heap instead (a profile recorded with --heap): allocations, bytes,\n"
           "the peak and the call paths that held it, leaks, temporary allocations,\n"
           "the top sites by bytes and by count, and a histogram of sizes",
           set(a.heap, true)},
          suppress_option(a.input.suppress),
          {"", "--markers", "",
           "the program's markers instead: per marker name, count, total and p50/p90/p99/max\n"
           "duration, and the top functions on-CPU and off-CPU inside its intervals",
           set(a.markers, true)},
          marker_option(a.input.marker),
          latency_option(a.input.latency),
          {"", "--json", "", "print JSON instead (the same numbers, for scripts)", set(a.json, true)},
          symbol_dir_option(a.input.symbols.symbol_dirs),
          {"", "--no-symbolicate", "", "keep unresolved addresses as lib+0xoffset",
           set(a.input.symbolicate, false)},
      },
      one_operand(a.in, "profile")};
  for (Option& o : critical_path_options(a.critical)) command.options.push_back(std::move(o));
  command.options.push_back({"", "--wait-blame", "",
                             "who made the thread wait instead: each wait on its critical path goes to\n"
                             "the stack of the thread that ended it (the same --thread, --marker,\n"
                             "--time-range); waits a timer or an interrupt ended are left out",
                             set(a.wait_blame, true)});
  command.options.push_back({"", "--include-irq", "",
                             "(--wait-blame) also the waits a timer or an interrupt ended",
                             set(a.include_irq, true)});
  if (auto exit = parse_options(command, args)) return *exit;
  if (a.include_irq && !a.wait_blame) return usage_error(kCommand, "--include-irq goes with --wait-blame");
  if (a.wait_blame && a.critical.on)
    return usage_error(kCommand, "--wait-blame or --critical-path: one view at a time");
  a.critical.on |= a.wait_blame;
  if (a.critical.on && a.input.latency)
    return usage_error(kCommand, "--latency weighs the recorded samples, not a critical path");
  // --critical-path follows wakes across threads: --marker names its intervals, it keeps every sample.
  if (a.critical.on)
    a.critical.marker = std::exchange(a.input.marker, {});
  else if (!a.critical.thread.empty() || !a.critical.time_range.empty())
    return usage_error(kCommand, "--thread and --time-range go with --critical-path or --wait-blame");
  if (!a.input.suppress.empty() && !a.heap) return usage_error(kCommand, "--suppress goes with --heap");
  if (a.in.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  return std::nullopt;
}

// Text on standard output: 0, or 1 when it could not be written.
int print_text(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

// One JSON document (what `body` writes) and a newline on standard output: 0, or 1 (said) when it failed.
template <typename F>
int print_json(F&& body) {
  auto out = sinks::open_output("-");
  {
    JsonWriter w(**out);
    body(w);
  }
  (*out)->write("\n");
  if (auto s = (*out)->finish(); !s) {
    say(s.error());
    return 1;
  }
  return 0;
}

// --heap: the heap's report, or a line saying the profile has none.
int report_heap(const model::Profile& profile, const ReportArgs& a, const sinks::Suppressed& suppressed) {
  if (!sinks::has_heap_data(profile)) {
    std::fprintf(stderr, "fxprof: %s has no heap data (record it with `fxprof record --heap`)\n",
                 a.in.c_str());
    return 1;
  }
  sinks::HeapReport h = sinks::make_heap_report(profile, a.opts.limit);
  h.suppressed_functions = a.input.suppress;
  h.suppressed_allocations = suppressed.allocations;
  h.suppressed_bytes = suppressed.bytes;
  if (!a.json) return print_text(sinks::format_heap_report(h));
  return print_json([&](JsonWriter& w) {
    w.begin_object().key("heap");
    sinks::write_heap_report_json(h, w);
    w.end_object();
  });
}

// --markers: the program's markers and what ran inside them.
int report_markers(const model::Profile& profile, const ReportArgs& a) {
  sinks::MarkerReport r = sinks::make_marker_report(profile, a.opts.limit);
  if (!a.json) return print_text(sinks::format_marker_report(r));
  return print_json([&](JsonWriter& w) { sinks::write_marker_report_json(r, w); });
}

// --critical-path: the thread's critical path over the interval asked for.
int report_critical_path(model::Profile& profile, const ReportArgs& a) {
  auto paths = critical_paths(profile, a.critical);
  if (!paths) {
    say(a.in + ": " + paths.error());
    return 1;
  }
  if (a.wait_blame) {
    const sinks::WaitBlame r =
        sinks::make_wait_blame(profile, paths->paths, paths->interval, a.include_irq, a.opts.limit);
    if (!a.json) return print_text(sinks::format_wait_blame(r));
    return print_json([&](JsonWriter& w) { sinks::write_wait_blame_json(r, w); });
  }
  sinks::CriticalPathReport r =
      sinks::make_critical_path_report(profile, paths->paths, paths->interval, a.opts.limit);
  if (!a.json) return print_text(sinks::format_critical_path_report(r));
  return print_json([&](JsonWriter& w) { sinks::write_critical_path_report_json(r, w); });
}

}  // namespace

int cmd_report(std::span<char*> args) {
  ReportArgs a;
  if (auto exit = parse_report_args(args, a)) return *exit;
  sinks::Suppressed suppressed;
  auto profile = load_profile_for_sinks(a.in, a.input, &suppressed);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  if (a.heap) return report_heap(*profile, a, suppressed);
  if (a.markers) return report_markers(*profile, a);
  if (a.critical.on) return report_critical_path(*profile, a);
  sinks::Report report = sinks::make_report(*profile, a.opts);
  if (a.json) return print_json([&](JsonWriter& w) { sinks::write_report_json(report, w); });
  return print_text(sinks::format_report(report, a.opts));
}

}  // namespace fxprof::cli
