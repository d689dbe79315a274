// `fxprof push --pyroscope URL | --parca ADDR FILE`: send a profile as pprof to a fleet engine.
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/publish.h"

namespace fxprof::cli {
namespace {

constexpr const char* kHelp =
    "Usage: fxprof push (--pyroscope URL | --parca ADDR) [OPTIONS] FILE\n"
    "\n"
    "Sends the profile FILE as pprof, symbols baked in (no debug-file upload needed), to the profiling\n"
    "engines a team already runs: CPU time, off-CPU time and sample counts are sample types of their own.\n"
    "\n"
    "  --pyroscope URL          Grafana Pyroscope: POST "
    "URL/ingest?name=APP{LABELS}&from=&until=&format=pprof\n"
    "  --parca ADDR             Parca: ProfileStoreService/WriteRaw at ADDR (host:port or URL), as gRPC-Web\n"
    "  --app NAME               the application name (default: the profiled program's name)\n"
    "  --label NAME=VALUE       a label of the series (repeatable)\n"
    "  --header 'NAME: VALUE'   an extra request header, e.g. authorization or a tenant (repeatable)\n"
    "  --symbol-dir DIR         also look for symbol files in DIR (repeatable)\n"
    "  -h, --help               this help\n";

constexpr std::string_view kCommand = "push";

// The options of where and how to push; false when `p` is not at one of them.
bool parse_push_option(ArgParser& p, PushTargets& t, std::string& error) {
  if (auto v = p.option("", "--pyroscope")) {
    t.pyroscope = *v;
  } else if (auto v = p.option("", "--parca")) {
    t.parca = *v;
  } else if (auto v = p.option("", "--app")) {
    t.options.app = *v;
  } else if (auto v = p.option("", "--label")) {
    error = add_label(*v, t.options.labels);
  } else {
    return false;
  }
  return true;
}

}  // namespace

int cmd_push(std::span<char*> args) {
  InputOptions input;
  PushTargets targets;
  std::string file;
  ArgParser p(args);
  while (!p.done()) {
    if (!p.at_option()) {
      if (p.take_separator()) continue;
      if (!file.empty())
        return usage_error(kCommand, "one profile at a time ('" + std::string(p.peek()) + "')");
      file = p.take();
      continue;
    }
    std::string error;
    if (p.flag("-h", "--help")) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (auto v = p.option("", "--header")) {
      if (v->find(':') == std::string::npos) return usage_error(kCommand, "--header needs 'NAME: VALUE'");
      targets.options.headers.push_back(*v);
    } else if (parse_push_option(p, targets, error)) {
      if (!error.empty()) return usage_error(kCommand, error);
    } else if (auto v = p.option("", "--symbol-dir")) {
      input.symbols.symbol_dirs.push_back(*v);
    } else if (!p.error().empty()) {
      return usage_error(kCommand, p.error());
    } else {
      return usage_error(kCommand, "unknown option '" + std::string(p.peek()) + "'");
    }
  }
  if (!p.error().empty()) return usage_error(kCommand, p.error());
  if (file.empty()) return usage_error(kCommand, "which profile? give FILE");
  if (targets.pyroscope.empty() && targets.parca.empty())
    return usage_error(kCommand, "where to? give --pyroscope URL or --parca ADDR");
  return push_profile(file, input, targets);
}

}  // namespace fxprof::cli
