// `fxprof export FORMAT IN [-o OUT]`: a saved profile as folded stacks, pprof or an SVG flame graph.
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/profile_input.h"
#include "sinks/flamegraph_svg.h"
#include "sinks/folded.h"
#include "sinks/output.h"
#include "sinks/pprof.h"

namespace fxprof::cli {
namespace {

constexpr const char* kHelp =
    "Usage: fxprof export FORMAT [OPTIONS] IN [-o OUT]\n"
    "\n"
    "Writes the saved profile IN (.json or .json.gz) in another format, symbolicated on the way:\n"
    "  folded   Brendan Gregg's collapsed stacks (`a;b;c 42`), one line per distinct call path, for\n"
    "           flamegraph.pl, inferno and speedscope (default OUT: IN's name with .folded)\n"
    "  pprof    gzipped profile.proto for go tool pprof, Pyroscope, Parca, Grafana (default OUT: .pb.gz)\n"
    "  svg      an interactive flame graph in one self-contained SVG file (default OUT: .svg)\n"
    "\n"
    "  -o, --output OUT         where to write (\"-\" for standard output; gzip when OUT ends in .gz)\n"
    "  --symbol-dir DIR         also look for symbol files in DIR (repeatable)\n"
    "  --no-symbolicate         keep unresolved addresses as lib+0xoffset\n"
    "  --no-inline              (folded, svg) merge inlined functions into the function they are in\n"
    "  --thread-roots           (folded, svg) a root frame per thread, \"name (tid N)\"\n"
    "  --process-roots          (folded, svg) a root frame per process, \"name (pid N)\"\n"
    "  --annotate               (folded) mark kernel frames with _[k] and inlined ones with _[i]\n"
    "  --icicle                 (svg) callers at the top, callees below\n"
    "  --title TEXT             (svg) the title (default \"Flame Graph\")\n"
    "  --width PX               (svg) width in pixels (default 1200)\n"
    "  --min-width PX           (svg) leave out boxes narrower than PX pixels (default 0.1)\n"
    "  -h, --help               this help\n";

constexpr std::string_view kCommand = "export";

}  // namespace

int cmd_export(std::span<char*> args) {
  InputOptions input;
  std::string format, in, out;
  exporter::TreeOptions tree;
  exporter::SvgOptions svg;
  bool annotate = false;
  ArgParser p(args);
  while (!p.done()) {
    if (!p.at_option()) {
      if (p.take_separator()) continue;
      if (format.empty()) {
        format = p.take();
        continue;
      }
      if (!in.empty())
        return usage_error(kCommand, "one input profile at a time ('" + std::string(p.peek()) + "')");
      in = p.take();
      continue;
    }
    if (p.flag("-h", "--help")) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (auto v = p.option("-o", "--output")) {
      out = *v;
    } else if (auto v = p.option("", "--symbol-dir")) {
      input.symbols.symbol_dirs.push_back(*v);
    } else if (p.flag("", "--no-symbolicate")) {
      input.symbolicate = false;
    } else if (p.flag("", "--no-inline")) {
      tree.inlined = false;
    } else if (p.flag("", "--thread-roots")) {
      tree.thread_roots = true;
    } else if (p.flag("", "--process-roots")) {
      tree.process_roots = true;
    } else if (p.flag("", "--annotate")) {
      annotate = true;
    } else if (p.flag("", "--icicle")) {
      svg.icicle = true;
    } else if (auto v = p.option("", "--title")) {
      svg.title = *v;
    } else if (auto v = p.option("", "--width")) {
      auto n = parse_number(*v);
      if (!n || *n < 100 || *n > 100000)
        return usage_error(kCommand, "--width needs a number of pixels (100 or more)");
      svg.width = *n;
    } else if (auto v = p.option("", "--min-width")) {
      auto n = parse_number(*v);
      if (!n || *n < 0) return usage_error(kCommand, "--min-width needs a number of pixels");
      svg.min_width = *n;
    } else if (!p.error().empty()) {
      return usage_error(kCommand, p.error());
    } else {
      return usage_error(kCommand, "unknown option '" + std::string(p.peek()) + "'");
    }
  }
  if (!p.error().empty()) return usage_error(kCommand, p.error());
  if (format.empty()) return usage_error(kCommand, "which format? folded, pprof or svg");
  if (format != "folded" && format != "pprof" && format != "svg")
    return usage_error(kCommand, "unknown format '" + format + "' (folded, pprof or svg)");
  if (in.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  if (out.empty())
    out = exporter::output_beside(in, format == "folded" ? ".folded" : format == "pprof" ? ".pb.gz" : ".svg");

  auto profile = load_profile_for_sinks(in, input);
  if (!profile) {
    std::fprintf(stderr, "fxprof: %s\n", profile.error().c_str());
    return profile.exit_code();
  }
  Status s;
  if (format == "folded") {
    s = exporter::write_folded(*profile, out, {tree, annotate});
  } else if (format == "pprof") {
    s = exporter::write_pprof(*profile, out);
  } else {
    svg.tree = tree;
    if (svg.subtitle.empty()) svg.subtitle = in;
    s = exporter::write_flamegraph_svg(*profile, out, svg);
  }
  if (!s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return s.exit_code();
  }
  if (out != "-") std::fprintf(stderr, "fxprof: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace fxprof::cli
