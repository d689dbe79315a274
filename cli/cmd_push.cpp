// `fxprof push --pyroscope URL | --parca ADDR FILE`: send a profile as pprof to a fleet engine.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/publish.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof push (--pyroscope URL | --pyroscope-ingest URL | --parca ADDR) [OPTIONS] FILE\n"
    "\n"
    "Sends the profile FILE as pprof, symbols baked in (no debug-file upload needed), to the profiling\n"
    "engines a team already runs: CPU time, off-CPU time and sample counts are sample types of their own.\n"
    "\n";

constexpr std::string_view kCommand = "push";

}  // namespace

int cmd_push(std::span<char*> args) {
  InputOptions input;
  PushTargets targets;
  std::string file;
  const Command command{
      kCommand,
      kUsage,
      {
          {"", "--pyroscope", "URL",
           "Grafana Pyroscope: its Push API, URL/push.v1.PusherService/Push (Connect), series\n"
           "{__name__=process_cpu, service_name=APP, LABELS}",
           store(targets.pyroscope)},
          {"", "--pyroscope-ingest", "URL",
           "an older Pyroscope: POST URL/ingest?name=APP{LABELS}&from=&until=&format=pprof",
           [&](const std::string& v) {
             targets.pyroscope = v;
             targets.pyroscope_ingest = true;
             return std::string();
           }},
          {"", "--parca", "ADDR",
           "Parca: ProfileStoreService/WriteRaw at ADDR (host:port or URL), as gRPC-Web",
           store(targets.parca)},
          {"", "--app", "NAME", "the application name (default: the profiled program's name)",
           store(targets.options.app)},
          {"", "--label", "NAME=VALUE", "a label of the series (repeatable)",
           [&](const std::string& v) { return add_label(v, targets.options.labels); }},
          {"", "--strip-args", "", "push the program's name without its arguments (\"recorded by\")",
           set(targets.strip_args, true)},
          header_option(targets.options.headers,
                        "an extra request header, e.g. authorization or a tenant (repeatable)"),
          symbol_dir_option(input.symbols.symbol_dirs),
      },
      one_operand(file, "profile")};
  if (auto exit = parse_options(command, args)) return *exit;
  if (file.empty()) return usage_error(kCommand, "which profile? give FILE");
  if (targets.pyroscope.empty() && targets.parca.empty())
    return usage_error(kCommand, "where to? give --pyroscope URL, --pyroscope-ingest URL or --parca ADDR");
  return push_profile(file, input, targets);
}

}  // namespace fxprof::cli
