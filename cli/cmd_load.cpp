// `fxprof load`: serve a saved profile again, with symbolication, like `samply load` (profiler-cli's
// --with-samply runs `<binary> load --no-open FILE` and waits for the profiler URL on its output).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/temp_dir.h"
#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/profile_input.h"
#include "gecko/gecko.h"
#include "gecko/gecko_reader.h"
#include "passes/passes.h"
#include "passes/symbolicate.h"
#include "passes/unbake.h"
#include "server/server.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof load [OPTIONS] FILE\n"
    "\n"
    "Serves a saved profile (.json or .json.gz) on 127.0.0.1 with symbol lookups for its libraries, and "
    "opens\n"
    "the Firefox Profiler on it. Stops with Ctrl+C; the file is left as it is. A perf.data file or a pprof\n"
    "profile (.pb.gz, .pb) is imported as `fxprof import` does and served from a temporary copy.\n"
    "\n";

constexpr std::string_view kCommand = "load";

// Parses the arguments into opts and file: nullopt to go on, else the exit status.
std::optional<int> parse_load_args(std::span<char*> args, server::ServeOptions& opts, std::string& file) {
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
           number("--port", {0, 65535, "a port number", true},
                  [&](double n) {
                    opts.port = static_cast<int>(n);
                    opts.port_exact = true;
                  })},
          symbol_dir_option(opts.symbols.symbol_dirs),
      },
      one_operand(file, "profile file")};
  if (auto exit = parse_options(command, args)) return *exit;
  if (file.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  return std::nullopt;
}

// Writes `profile` to a temporary copy (in `copy`), which opts then serves. The exit status on failure.
// `tracks`: the critical-path tracks (the reader leaves them out: passes/passes.h makes them again).
std::optional<int> write_copy(const model::Profile& profile, server::ServeOptions& opts,
                              std::optional<TempFolder>& copy,
                              const std::vector<model::SyntheticThread>& tracks) {
  copy.emplace("fxprof-load");
  if (copy->path().empty()) {
    std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
    return 1;
  }
  const std::string tmp = copy->path() + "/profile.json";
  if (auto s = gecko::write_gecko_profile(profile, tmp, tracks); !s) {
    say(s.error());
    return s.exit_code();
  }
  opts.kept_path = opts.profile_path;  // the copy is removed at the end: the user's file stays
  opts.profile_path = tmp;
  opts.view = gecko::gecko_view_query(profile, tracks);  // the copy's threads, its tracks among them
  return std::nullopt;
}

using KeptTracks = std::vector<std::pair<size_t, model::Thread>>;  // gecko::ReadInfo::tracks

// A self-contained profile with --symbol-dir: its frames resolved with the given folders; when some were,
// that copy (in `resolved`) is what opts serves. The exit status on failure.
std::optional<int> bake_whole(model::Profile& profile, server::ServeOptions& opts,
                              std::optional<TempFolder>& resolved, KeptTracks& kept) {
  symbolizer::Symbolizer baking(opts.symbols);
  const passes::Outcome passed =
      passes::run(profile, passes::with_tracks(profile, kept, {&baking, passes::Naming::Baked, true}));
  if (const std::string line = passes::missing_debug_line(passed.named.no_debug); !line.empty()) say(line);
  opts.symbolizer = nullptr;
  if (passed.named.resolved > 0) return write_copy(profile, opts, resolved, passed.tracks);
  return std::nullopt;
}

// A baked profile without --symbol-dir: the frames of binaries still on disk as recorded become addresses
// again in a temporary copy (passes/unbake.h), so that the front end asks our server for their names,
// inlined functions, source and assembly; one line says which binaries keep their saved names. The exit
// status on failure.
std::optional<int> unbake_whole(model::Profile& profile, server::ServeOptions& opts,
                                std::optional<TempFolder>& copy, KeptTracks& kept) {
  const passes::Options o = passes::with_tracks(profile, kept, {});
  const passes::UnbakeResult r = passes::unbake(profile);
  if (const std::string line = passes::unbake_line(r); !line.empty()) say(line);
  if (r.binaries == 0) return std::nullopt;
  return write_copy(profile, opts, copy, passes::run(profile, o).tracks);
}

// A perf.data file or pprof profile: imported (names left to the symbol server), written to a temporary
// Gecko profile, served.
int serve_imported(const std::string& file, server::ServeOptions& opts) {
  InputOptions in;
  in.symbols = opts.symbols;
  in.symbolicate = false;
  auto profile = load_profile_for_sinks(file, in);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  TempFolder tmp("fxprof-load");
  if (tmp.path().empty()) {
    std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
    return 1;
  }
  opts.profile_path = tmp.path() + "/profile.json";
  if (auto s = gecko::write_gecko_profile(*profile, opts.profile_path); !s) {
    say(s.error());
    return s.exit_code();
  }
  opts.libs = passes::known_libs(*profile);
  opts.view = gecko::gecko_view_query(*profile);
  profile = Error{};  // free the model before serving
  symbolizer::Symbolizer symbols(opts.symbols);
  opts.symbolizer = &symbols;
  if (auto s = server::serve_profile(opts); !s) {
    say(s.error());
    return s.exit_code();
  }
  return 0;
}

}  // namespace

int cmd_load(std::span<char*> args) {
  server::ServeOptions opts;
  std::string file;
  if (auto exit = parse_load_args(args, opts, file)) return *exit;
  if (is_imported_input(file)) return serve_imported(file, opts);
  opts.profile_path = file;
  // Read whole by the reader every command uses, before anything is served: a profile `report` or
  // `export` refuses (cut short, trailing garbage, a stack table with a cycle, bad UTF-8) is refused here
  // too, with the same line, rather than served from its head.
  gecko::ReadInfo info;
  info.keep_tracks = true;  // a copy written again keeps them
  auto profile = gecko::read_gecko_profile(file, &info);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  std::optional<TempFolder> resolved;  // the profile served after resolving more symbols, removed at the end
  if (!info.processed) {  // processed-format profiles (samply's) are served as they are, inspected there
    opts.libs = passes::known_libs(*profile);
    // Every thread shown, the busiest selected: as the writer counted it, with the threads the reader leaves
    // out (gecko.h, Synthetic).
    opts.view = gecko::file_view_query(*profile);
    if (profile->meta.presymbolicated && !opts.symbols.symbol_dirs.empty()) {
      if (auto exit = bake_whole(*profile, opts, resolved, info.tracks)) return *exit;
    } else if (profile->meta.presymbolicated) {
      if (auto exit = unbake_whole(*profile, opts, resolved, info.tracks)) return *exit;
    }
  }
  if (auto s = server::serve_profile(opts); !s) {
    say(s.error());
    return s.exit_code();
  }
  return 0;
}

}  // namespace fxprof::cli
