// `fxprof load`: serve a saved profile again, with symbolication, like `samply load` (profiler-cli's
// --with-samply runs `<binary> load --no-open FILE` and waits for the profiler URL on its output).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "gecko/gecko.h"
#include "gecko/gecko_reader.h"
#include "pipeline/symbolicate.h"
#include "server/server.h"

namespace fxprof::cli {
namespace {

constexpr const char* kHelp =
    "Usage: fxprof load [OPTIONS] FILE\n"
    "\n"
    "Serves a saved profile (.json or .json.gz) on 127.0.0.1 with symbol lookups for its libraries, and "
    "opens\n"
    "the Firefox Profiler on it. Stops with Ctrl+C; the file is left as it is.\n"
    "\n"
    "  -n, --no-open            do not open a browser; print the Firefox Profiler URL on stdout\n"
    "  --address ADDR           address to serve on (default 127.0.0.1)\n"
    "  -P, --port PORT          port to serve on (default 3000 or the next free one up to 3099;\n"
    "                           a port given here is used or it is an error; 0 = any free port)\n"
    "  --symbol-dir DIR         also look for symbol files in DIR (repeatable)\n"
    "  -h, --help               this help\n";

// A temporary file removed when the command ends (the profile served after resolving more symbols).
class TempPath {
 public:
  TempPath() = default;
  ~TempPath() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& make(const std::string& suffix) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/fxprof-load-" + std::to_string(::getpid()) + suffix;
    return path_;
  }

 private:
  std::string path_;
};

constexpr std::string_view kCommand = "load";

}  // namespace

int cmd_load(std::span<char*> args) {
  server::ServeOptions opts;
  std::string file;
  ArgParser p(args);
  while (!p.done()) {
    if (!p.at_option()) {
      if (p.take_separator()) continue;
      if (!file.empty())
        return usage_error(kCommand, "one profile file at a time ('" + std::string(p.peek()) + "')");
      file = p.take();
      continue;
    }
    if (p.flag("-h", "--help")) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (p.flag("-n", "--no-open")) {
      opts.open_browser = false;
    } else if (auto v = p.option("", "--address")) {
      opts.address = *v;
    } else if (auto v = p.option("-P", "--port")) {
      auto n = parse_number(*v);
      if (!n || *n < 0 || *n > 65535 || *n != static_cast<int>(*n))
        return usage_error(kCommand, "--port needs a port number");
      opts.port = static_cast<int>(*n);
      opts.port_exact = true;
    } else if (auto v = p.option("", "--symbol-dir")) {
      opts.symbols.symbol_dirs.push_back(*v);
    } else if (!p.error().empty()) {
      return usage_error(kCommand, p.error());
    } else {
      return usage_error(kCommand, "unknown option '" + std::string(p.peek()) + "'");
    }
  }
  if (!p.error().empty()) return usage_error(kCommand, p.error());
  if (file.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  opts.profile_path = file;
  // Source -> model: validates the file (one-line errors) and lists its libraries without a DOM.
  TempPath resolved;
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
          const std::string& tmp = resolved.make(".json");
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
