// `fxprof symbolicate IN -o OUT`: bake names into a profile so that it opens without fxprof (to share it).
#include <cstdio>
#include <string>

#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "passes/symbolicate.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof symbolicate [OPTIONS] IN -o OUT\n"
    "\n"
    "Rewrites the profile IN with function names baked in (inlined functions as their own frames), so that\n"
    "it opens in the Firefox Profiler with no fxprof server and can be shared. OUT may be IN; it is gzip\n"
    "when its name ends in .gz.\n"
    "\n";

constexpr std::string_view kCommand = "symbolicate";

}  // namespace

int cmd_symbolicate(std::span<char*> args) {
  symbolizer::Options symbols;
  std::string in, out;
  const Command command{kCommand,
                        kUsage,
                        {{"-o", "--output", "OUT", "where to write the self-contained profile", store(out)},
                         symbol_dir_option(symbols.symbol_dirs)},
                        one_operand(in, "input profile")};
  if (auto exit = parse_options(command, args)) return *exit;
  if (in.empty()) return usage_error(kCommand, "which profile? give IN -o OUT");
  if (out.empty()) return usage_error(kCommand, "where to? give -o OUT (it may be IN itself)");
  symbolizer::Symbolizer symbolizer(symbols);
  if (auto s = passes::symbolicate_file(in, out, symbolizer); !s) {
    say(s.error());
    return s.exit_code();
  }
  std::fprintf(stderr, "fxprof: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace fxprof::cli
