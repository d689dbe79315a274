// `fxprof export FORMAT IN [-o OUT]`: a saved profile as folded stacks, pprof or an SVG flame graph.
#include <cstdio>
#include <string>
#include <utility>

#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/critical_path.h"
#include "cli/options.h"
#include "cli/profile_input.h"
#include "sinks/exports.h"
#include "sinks/output.h"

namespace fxprof::cli {
namespace {

// --help's text, the formats' lines from the sinks' table.
const std::string& usage() {
  static const std::string text = [] {
    std::string u =
        "Usage: fxprof export FORMAT [OPTIONS] IN [-o OUT]\n"
        "\n"
        "Writes the saved profile IN (.json or .json.gz) in another format, symbolicated on the way:\n";
    bool first = true;
    for (const sinks::ExportFormat& f : sinks::export_formats()) {
      std::string line = "  " + std::string(f.name);
      line.resize(11, ' ');
      for (char c : f.help) line += c == '\n' ? std::string("\n           ") : std::string(1, c);
      u += line + " (default OUT: " + (first ? "IN's name with " : "") + std::string(f.extension) + ")\n";
      first = false;
    }
    return u + "\n";
  }();
  return text;
}

constexpr std::string_view kCommand = "export";

bool has_allocations(const model::Profile& p) {
  for (const model::Process& proc : p.processes)
    for (const model::Thread& th : proc.threads)
      if (!th.allocations.empty()) return true;
  return false;
}

}  // namespace

int cmd_export(std::span<char*> args) {
  InputOptions input;
  std::string format, in, out;
  sinks::ExportOptions options;
  sinks::TreeOptions& tree = options.folded.tree;
  sinks::SvgOptions& svg = options.svg;
  bool& annotate = options.folded.annotate;
  CriticalPathOptions critical;
  const Take take_in = one_operand(in, "input profile");
  Command command{
      kCommand,
      usage(),
      {
          {"-o", "--output", "OUT", "where to write (\"-\" for standard output; gzip when OUT ends in .gz)",
           store(out)},
          symbol_dir_option(input.symbols.symbol_dirs),
          marker_option(input.marker),
          latency_option(input.latency),
          {"", "--no-symbolicate", "", "keep unresolved addresses as lib+0xoffset",
           set(input.symbolicate, false)},
          {"", "--cpu-only", "", "on-CPU samples only (the default; pprof keeps off-CPU time as off_cpu)",
           set(tree.clock, sinks::Clock::Cpu)},
          {"", "--wall", "", "wall-clock samples: on the CPU, blocked and preempted",
           set(tree.clock, sinks::Clock::Wall)},
          {"", "--no-inline", "", "(folded, svg) merge inlined functions into the function they are in",
           set(tree.inlined, false)},
          {"", "--thread-roots", "", "(folded, svg) a root frame per thread, \"name (tid N)\"",
           set(tree.thread_roots, true)},
          {"", "--process-roots", "", "(folded, svg) a root frame per process, \"name (pid N)\"",
           set(tree.process_roots, true)},
          {"", "--annotate", "", "(folded) mark kernel frames with _[k] and inlined ones with _[i]",
           set(annotate, true)},
          {"", "--heap", "KIND",
           "(folded, svg) the heap of a --heap recording instead of samples: `allocated`\n"
           "(bytes), `allocations` (blocks) or `leaked` (bytes never freed)",
           [&](const std::string& v) {
             if (v == "allocated")
               tree.weight = sinks::Weight::AllocatedBytes;
             else if (v == "allocations")
               tree.weight = sinks::Weight::Allocations;
             else if (v == "leaked")
               tree.weight = sinks::Weight::LeakedBytes;
             else
               return "--heap takes allocated, allocations or leaked, not '" + v + "'";
             return std::string();
           }},
          suppress_option(input.suppress),
          {"", "--icicle", "", "(svg) callers at the top, callees below", set(svg.icicle, true)},
          {"", "--title", "TEXT", "(svg) the title (default \"Flame Graph\")", store(svg.title)},
          {"", "--width", "PX", "(svg) width in pixels (default 1200)",
           number("--width", {100, 100000, "a number of pixels"}, [&](double n) { svg.width = n; })},
          {"", "--min-width", "PX", "(svg) leave out boxes narrower than PX pixels (default 0.1)",
           number("--min-width", {0, 100000, "a number of pixels"}, [&](double n) { svg.min_width = n; })},
      },
      [&](const std::string& v) { return format.empty() ? (format = v, std::string()) : take_in(v); }};
  for (Option& o : critical_path_options(critical)) command.options.push_back(std::move(o));
  if (auto exit = parse_options(command, args)) return *exit;
  if (critical.on && input.latency)
    return usage_error(kCommand, "--latency weighs the recorded samples, not a critical path");
  if (critical.on) {
    critical.marker = std::exchange(input.marker, {});  // the path's intervals, not a filter of samples
    tree.clock = sinks::Clock::Wall;                    // its waits are part of it
  } else if (!critical.thread.empty() || !critical.time_range.empty()) {
    return usage_error(kCommand, "--thread and --time-range go with --critical-path");
  }
  if (!input.suppress.empty() && tree.weight == sinks::Weight::Samples)
    return usage_error(kCommand, "--suppress goes with --heap KIND");
  const std::string names = sinks::export_format_names();
  if (format.empty()) return usage_error(kCommand, "which format? " + names);
  const sinks::ExportFormat* sink = sinks::find_export_format(format);
  if (sink == nullptr) return usage_error(kCommand, "unknown format '" + format + "' (" + names + ")");
  if (in.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  if (out.empty()) out = sinks::output_beside(in, std::string(sink->extension));

  auto profile = load_profile_for_sinks(in, input);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  if (critical.on) {
    auto paths = critical_paths(*profile, critical);
    if (!paths) {
      say(in + ": " + paths.error());
      return 1;
    }
    keep_only_critical_path(*profile, *paths);
  }
  if (tree.weight != sinks::Weight::Samples && !has_allocations(*profile)) {
    say(in + " has no heap data: record the program with --heap");
    return 1;
  }
  if (svg.subtitle.empty()) svg.subtitle = in;
  const Status s = sink->write(*profile, out, options);
  if (!s) {
    say(s.error());
    return s.exit_code();
  }
  if (out != "-") std::fprintf(stderr, "fxprof: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace fxprof::cli
