// `fxprof load`: serve a saved profile again, with symbolication, like `samply load` (profiler-cli's
// --with-samply runs `<binary> load --no-open FILE` and waits for the profiler URL on its output).
#include <cstdio>
#include <optional>
#include <string>

#include "base/temp_dir.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "gecko/gecko.h"
#include "gecko/gecko_reader.h"
#include "pipeline/symbolicate.h"
#include "server/server.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof load [OPTIONS] FILE\n"
    "\n"
    "Serves a saved profile (.json or .json.gz) on 127.0.0.1 with symbol lookups for its libraries, and "
    "opens\n"
    "the Firefox Profiler on it. Stops with Ctrl+C; the file is left as it is.\n"
    "\n";

constexpr std::string_view kCommand = "load";

}  // namespace

int cmd_load(std::span<char*> args) {
  server::ServeOptions opts;
  std::string file;
  const Command command{
      kCommand,
      kUsage,
      {
          {"-n", "--no-open", "", "do not open a browser; print the Firefox Profiler URL on stdout",
           set(opts.open_browser, false)},
          address_option(opts.address, "address to serve on (default 127.0.0.1)"),
          {"-P", "--port", "PORT",
           "port to serve on (default 3000 or the next free one up to 3099;\n"
           "a port given here is used or it is an error; 0 = any free port)",
           number([](double n) { return !(n < 0 || n > 65535 || n != static_cast<int>(n)); },
                  "--port needs a port number",
                  [&](double n) {
                    opts.port = static_cast<int>(n);
                    opts.port_exact = true;
                  })},
          symbol_dir_option(opts.symbols.symbol_dirs),
      },
      one_operand(file, "profile file")};
  if (auto exit = parse_options(command, args)) return *exit;
  if (file.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  opts.profile_path = file;
  // Source -> model: validates the file (one-line errors) and lists its libraries without a DOM.
  std::optional<TempFolder> resolved;  // the profile served after resolving more symbols, removed at the end
  {
    exporter::ReadInfo info;
    auto profile = exporter::read_gecko_profile(file, &info);
    if (!profile) {
      std::fprintf(stderr, "fxprof: %s\n", profile.error().c_str());
      return profile.exit_code();
    }
    if (!info.processed) {  // processed-format profiles (samply's) are served as they are, inspected there
      opts.libs = pipeline::known_libs(*profile);
      opts.view = exporter::gecko_view_query(*profile);  // every thread shown, the busiest selected
      // A self-contained profile has no server to ask: resolve what is still unresolved in it with the given
      // symbol folders, and serve that copy.
      if (profile->meta.presymbolicated && !opts.symbols.symbol_dirs.empty()) {
        symbolizer::Symbolizer symbols(opts.symbols);
        if (pipeline::symbolicate(*profile, symbols).resolved > 0) {
          resolved.emplace("fxprof-load");
          if (resolved->path().empty()) {
            std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
            return 1;
          }
          const std::string tmp = resolved->path() + "/profile.json";
          if (auto s = exporter::write_gecko_profile(*profile, tmp); !s) {
            std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
            return s.exit_code();
          }
          opts.profile_path = tmp;
        }
      }
    }
  }
  if (auto s = server::serve_profile(opts); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return s.exit_code();
  }
  return 0;
}

}  // namespace fxprof::cli
