// `fxprof diff BASE NEW`: what changed between two profiles: a table of the functions whose share changed
// most, a differential flame graph, and optionally the Firefox Profiler's comparison view of both.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/profile_input.h"
#include "exporter/diff.h"
#include "exporter/gecko.h"
#include "server/server.h"

namespace fxprof::cli {
namespace {

constexpr const char* kHelp =
    "Usage: fxprof diff [OPTIONS] BASE NEW\n"
    "\n"
    "Compares two saved profiles (for example before and after a change), symbolicated on the way. Prints\n"
    "the functions whose share of samples changed most (self and total, in percentage points of each\n"
    "profile's samples, so runs of different length compare), and writes a differential flame graph: NEW's\n"
    "flame graph with boxes coloured by the change of their share (red grew, blue shrank).\n"
    "\n"
    "  -o, --output SVG         the differential flame graph (default diff.svg; \"-\" for standard output)\n"
    "  --limit N                rows of the table (default 10)\n"
    "  --no-inline              inlined functions count as the function they were inlined into\n"
    "  --symbol-dir DIR         also look for symbol files in DIR (repeatable)\n"
    "  --serve                  also serve both profiles (symbols baked in) and print the Firefox "
    "Profiler's\n"
    "                           comparison URL; runs until Ctrl+C\n"
    "  --address ADDR           address to serve on with --serve (default 127.0.0.1)\n"
    "  -P, --port PORT          port of the first profile's server with --serve, the second's is PORT+1\n"
    "                           (default: any free ports)\n"
    "  -h, --help               this help\n";

constexpr std::string_view kCommand = "diff";

// A private temporary folder removed with its contents.
class TempFolder {
 public:
  TempFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/fxprof-diff-XXXXXX";
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string profiler_origin() {
  std::string origin = "https://profiler.firefox.com";
  if (const char* env = std::getenv("PROFILER_URL"); env && *env) {
    origin = env;
    while (!origin.empty() && origin.back() == '/') origin.pop_back();
  }
  return origin;
}

// Serves both (already symbolicated) profiles until SIGINT/SIGTERM and prints the comparison URL.
// `port` 0: any free ports; else base on `port`, new on `port`+1, exactly.
int serve_both(model::Profile& base, model::Profile& next, const std::string& address, int port) {
  TempFolder dir;
  if (dir.path().empty()) {
    std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
    return 1;
  }
  const std::string files[2] = {dir.path() + "/base.json.gz", dir.path() + "/new.json.gz"};
  model::Profile* profiles[2] = {&base, &next};
  for (int i = 0; i < 2; ++i) {
    profiles[i]->meta.presymbolicated = true;  // names are in: the comparison view does not symbolicate
    if (auto s = exporter::write_gecko_profile(*profiles[i], files[i]); !s) {
      std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
      return 1;
    }
  }
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);  // before the server threads start: they inherit it
  symbolizer::Symbolizer symbols;
  std::unique_ptr<server::ProfileServer> servers[2];
  for (int i = 0; i < 2; ++i) {
    server::ProfileServer::Config c;
    c.profile_path = files[i];
    c.address = address;
    c.port = port == 0 ? 0 : port + i;
    c.port_exact = port != 0;
    auto s = server::ProfileServer::start(c, symbols);
    if (!s) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
      return 1;
    }
    servers[i] = std::move(*s);
  }
  const std::string origin = profiler_origin();
  // Each profile of the comparison must select a thread, or the front end refuses the URL ("No thread has
  // been selected in profile 0").
  auto view = [&](const server::ProfileServer& s, const model::Profile& p) {
    return origin + "/from-url/" + server::percent_encode(s.profile_url()) + "/calltree/?" +
           exporter::gecko_view_query(p);
  };
  std::printf("base profile: %s\nnew profile:  %s\n%s/compare/?profiles[]=%s&profiles[]=%s\n",
              servers[0]->profile_url().c_str(), servers[1]->profile_url().c_str(), origin.c_str(),
              server::percent_encode(view(*servers[0], base)).c_str(),
              server::percent_encode(view(*servers[1], next)).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "fxprof: open the comparison URL above; Ctrl+C stops serving\n");
  int sig = 0;
  sigwait(&set, &sig);
  servers[0]->stop();
  servers[1]->stop();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return 0;
}

}  // namespace

int cmd_diff(std::span<char*> args) {
  InputOptions input;
  std::string out = "diff.svg", address = "127.0.0.1";
  int port = 0;
  std::vector<std::string> files;
  size_t limit = 10;
  bool serve = false;
  exporter::SvgOptions svg;
  ArgParser p(args);
  while (!p.done()) {
    if (!p.at_option()) {
      if (p.take_separator()) continue;
      files.push_back(p.take());
      continue;
    }
    if (p.flag("-h", "--help")) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (auto v = p.option("-o", "--output")) {
      out = *v;
    } else if (auto v = p.option("", "--limit")) {
      auto n = parse_number(*v);
      if (!n || *n < 1 || *n != static_cast<size_t>(*n))
        return usage_error(kCommand, "--limit needs a positive number");
      limit = static_cast<size_t>(*n);
    } else if (p.flag("", "--no-inline")) {
      svg.tree.inlined = false;
    } else if (auto v = p.option("", "--symbol-dir")) {
      input.symbols.symbol_dirs.push_back(*v);
    } else if (p.flag("", "--serve")) {
      serve = true;
    } else if (auto v = p.option("", "--address")) {
      address = *v;
    } else if (auto v = p.option("-P", "--port")) {
      auto n = parse_number(*v);
      if (!n || *n < 1 || *n > 65534 || *n != static_cast<int>(*n))
        return usage_error(kCommand, "--port needs a port number (1-65534: the second profile takes PORT+1)");
      port = static_cast<int>(*n);
    } else if (!p.error().empty()) {
      return usage_error(kCommand, p.error());
    } else {
      return usage_error(kCommand, "unknown option '" + std::string(p.peek()) + "'");
    }
  }
  if (!p.error().empty()) return usage_error(kCommand, p.error());
  if (files.size() != 2) return usage_error(kCommand, "give two profiles: BASE NEW");
  auto base = load_profile_for_sinks(files[0], input);
  if (!base) {
    std::fprintf(stderr, "fxprof: %s\n", base.error().c_str());
    return base.exit_code();
  }
  auto next = load_profile_for_sinks(files[1], input);
  if (!next) {
    std::fprintf(stderr, "fxprof: %s\n", next.error().c_str());
    return next.exit_code();
  }
  exporter::Diff d = exporter::diff_profiles(*base, *next, svg.tree.inlined);
  // With the SVG on standard output, the table goes to stderr.
  std::string table = exporter::format_diff(d, limit);
  std::fputs(table.c_str(), out == "-" ? stderr : stdout);
  std::fflush(stdout);
  svg.subtitle = files[0] + " -> " + files[1];
  if (auto s = exporter::write_diff_svg(*base, *next, out, svg); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return s.exit_code();
  }
  if (out != "-") std::fprintf(stderr, "fxprof: wrote %s\n", out.c_str());
  if (serve) return serve_both(*base, *next, address, port);
  return 0;
}

}  // namespace fxprof::cli
