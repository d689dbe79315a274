// `fxprof export FORMAT IN [-o OUT]`: a saved profile as folded stacks, pprof or an SVG flame graph.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/profile_input.h"
#include "sinks/flamegraph_svg.h"
#include "sinks/folded.h"
#include "sinks/output.h"
#include "sinks/pprof.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof export FORMAT [OPTIONS] IN [-o OUT]\n"
    "\n"
    "Writes the saved profile IN (.json or .json.gz) in another format, symbolicated on the way:\n"
    "  folded   Brendan Gregg's collapsed stacks (`a;b;c 42`), one line per distinct call path, for\n"
    "           flamegraph.pl, inferno and speedscope (default OUT: IN's name with .folded)\n"
    "  pprof    gzipped profile.proto for go tool pprof, Pyroscope, Parca, Grafana (default OUT: .pb.gz)\n"
    "  svg      an interactive flame graph in one self-contained SVG file (default OUT: .svg)\n"
    "\n";

constexpr std::string_view kCommand = "export";

}  // namespace

int cmd_export(std::span<char*> args) {
  InputOptions input;
  std::string format, in, out;
  sinks::TreeOptions tree;
  sinks::SvgOptions svg;
  bool annotate = false;
  const Take take_in = one_operand(in, "input profile");
  const Command command{
      kCommand,
      kUsage,
      {
          {"-o", "--output", "OUT", "where to write (\"-\" for standard output; gzip when OUT ends in .gz)",
           store(out)},
          symbol_dir_option(input.symbols.symbol_dirs),
          {"", "--no-symbolicate", "", "keep unresolved addresses as lib+0xoffset",
           set(input.symbolicate, false)},
          {"", "--no-inline", "", "(folded, svg) merge inlined functions into the function they are in",
           set(tree.inlined, false)},
          {"", "--thread-roots", "", "(folded, svg) a root frame per thread, \"name (tid N)\"",
           set(tree.thread_roots, true)},
          {"", "--process-roots", "", "(folded, svg) a root frame per process, \"name (pid N)\"",
           set(tree.process_roots, true)},
          {"", "--annotate", "", "(folded) mark kernel frames with _[k] and inlined ones with _[i]",
           set(annotate, true)},
          {"", "--icicle", "", "(svg) callers at the top, callees below", set(svg.icicle, true)},
          {"", "--title", "TEXT", "(svg) the title (default \"Flame Graph\")", store(svg.title)},
          {"", "--width", "PX", "(svg) width in pixels (default 1200)",
           number([](double n) { return !(n < 100 || n > 100000); },
                  "--width needs a number of pixels (100 or more)", [&](double n) { svg.width = n; })},
          {"", "--min-width", "PX", "(svg) leave out boxes narrower than PX pixels (default 0.1)",
           number([](double n) { return !(n < 0); }, "--min-width needs a number of pixels",
                  [&](double n) { svg.min_width = n; })},
      },
      [&](const std::string& v) { return format.empty() ? (format = v, std::string()) : take_in(v); }};
  if (auto exit = parse_options(command, args)) return *exit;
  if (format.empty()) return usage_error(kCommand, "which format? folded, pprof or svg");
  if (format != "folded" && format != "pprof" && format != "svg")
    return usage_error(kCommand, "unknown format '" + format + "' (folded, pprof or svg)");
  if (in.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  if (out.empty())
    out = sinks::output_beside(in, format == "folded" ? ".folded" : format == "pprof" ? ".pb.gz" : ".svg");

  auto profile = load_profile_for_sinks(in, input);
  if (!profile) {
    std::fprintf(stderr, "fxprof: %s\n", profile.error().c_str());
    return profile.exit_code();
  }
  Status s;
  if (format == "folded") {
    s = sinks::write_folded(*profile, out, {tree, annotate});
  } else if (format == "pprof") {
    s = sinks::write_pprof(*profile, out);
  } else {
    svg.tree = tree;
    if (svg.subtitle.empty()) svg.subtitle = in;
    s = sinks::write_flamegraph_svg(*profile, out, svg);
  }
  if (!s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return s.exit_code();
  }
  if (out != "-") std::fprintf(stderr, "fxprof: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace fxprof::cli
