// `fxprof symbolicate IN -o OUT`: bake names into a profile so that it opens without fxprof (to share it).
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "pipeline/symbolicate.h"

namespace fxprof::cli {
namespace {

constexpr const char* kHelp =
    "Usage: fxprof symbolicate [OPTIONS] IN -o OUT\n"
    "\n"
    "Rewrites the profile IN with function names baked in (inlined functions as their own frames), so that\n"
    "it opens in the Firefox Profiler with no fxprof server and can be shared. OUT may be IN; it is gzip\n"
    "when its name ends in .gz.\n"
    "\n"
    "  -o, --output OUT         where to write the self-contained profile\n"
    "  --symbol-dir DIR         also look for symbol files in DIR (repeatable)\n"
    "  -h, --help               this help\n";

constexpr std::string_view kCommand = "symbolicate";

}  // namespace

int cmd_symbolicate(std::span<char*> args) {
  symbolizer::Options symbols;
  std::string in, out;
  ArgParser p(args);
  while (!p.done()) {
    if (!p.at_option()) {
      if (p.take_separator()) continue;
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
      symbols.symbol_dirs.push_back(*v);
    } else if (!p.error().empty()) {
      return usage_error(kCommand, p.error());
    } else {
      return usage_error(kCommand, "unknown option '" + std::string(p.peek()) + "'");
    }
  }
  if (!p.error().empty()) return usage_error(kCommand, p.error());
  if (in.empty()) return usage_error(kCommand, "which profile? give IN -o OUT");
  if (out.empty()) return usage_error(kCommand, "where to? give -o OUT (it may be IN itself)");
  symbolizer::Symbolizer symbolizer(symbols);
  if (auto s = pipeline::symbolicate_file(in, out, symbolizer); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return s.exit_code();
  }
  std::fprintf(stderr, "fxprof: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace fxprof::cli
