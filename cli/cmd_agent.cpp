// `fxprof agent (--pyroscope URL | --parca ADDR) [-p PID | --cgroup PATH] [OPTIONS]`: continuous profiling
// (agent/agent.h).
#include <cstdio>
#include <string>

#include "agent/agent.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/publish.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof agent (--pyroscope URL | --pyroscope-ingest URL | --parca ADDR) [OPTIONS]\n"
    "\n"
    "Profiles the whole machine (or -p PIDs, or a cgroup) without end at a low rate, and every window\n"
    "(--every) sends what ran, symbolicated here, as pprof to Pyroscope or Parca: a series per process and\n"
    "profile type (process_cpu; off_cpu with --off-cpu), labelled service_name (the program), host, pid and\n"
    "each --label. A window that cannot be sent is tried again, then dropped with a line on stderr.\n"
    "SIGINT/SIGTERM send the current window and exit 0. Needs root or kernel.perf_event_paranoid <= 0\n"
    "(-p: the processes' owner, as record -p).\n"
    "\n";

constexpr std::string_view kCommand = "agent";

// "10", "10s", "2m": seconds.
Take seconds_option(std::string_view option, double& into) {
  return [option, &into](const std::string& v) {
    std::string number = v;
    double scale = 1;
    if (!number.empty() && (number.back() == 's' || number.back() == 'm')) {
      scale = number.back() == 'm' ? 60 : 1;
      number.pop_back();
    }
    std::string error;
    auto n = parse_number(option, number, {0.1, 86400, "a number of seconds (10, 10s or 1m)", false, false},
                          error);
    if (!n) return error + " (got '" + v + "')";
    if (*n * scale > 86400) return std::string(option) + ": at most a day, got '" + v + "'";
    into = *n * scale;
    return std::string();
  };
}

}  // namespace

int cmd_agent(std::span<char*> args) {
  agent::Options o;
  o.record.system_wide = true;
  o.record.frequency_hz = 19;
  o.record.off_cpu_threshold_ms = 1e12;  // no wait markers: the agent sends samples only
  std::vector<int> pids;
  const Command command{
      kCommand,
      kUsage,
      {
          {"", "--pyroscope", "URL", "Grafana Pyroscope: its Push API (push.v1.PusherService/Push)",
           store(o.pyroscope)},
          {"", "--pyroscope-ingest", "URL", "an older Pyroscope: its /ingest (one request per series)",
           [&](const std::string& v) {
             o.pyroscope = v;
             o.pyroscope_ingest = true;
             return std::string();
           }},
          {"", "--parca", "ADDR", "Parca: ProfileStoreService/WriteRaw at ADDR (host:port or URL)",
           store(o.parca)},
          {"", "--every", "SECONDS", "the window: one push per window (default 10s; 10, 10s, 1m)",
           seconds_option("--every", o.every_s)},
          {"-F", "--freq", "HZ", "samples per second per CPU (default 19)",
           number("--freq", {0, 1e5, "a number of samples per second", false, true},
                  [&](double v) { o.record.frequency_hz = v; })},
          pid_option(pids, "only these processes (and what they start), until they exit"),
          {"", "--cgroup", "PATH", "only the processes of this cgroup (v2 folder), read each window",
           store(o.cgroup)},
          {"", "--off-cpu", "", "also blocked time, as an off_cpu series (costs a stack copy per switch)",
           set(o.record.off_cpu, true)},
          {"", "--label", "NAME=VALUE", "a label of every series (repeatable)",
           [&](const std::string& v) { return add_label(v, o.labels); }},
          {"", "--host", "NAME", "the host label (default: the machine's name)", store(o.host)},
          header_option(o.headers, "an extra request header, e.g. authorization or a tenant (repeatable)"),
          {"", "--attempts", "N", "tries per window before it is dropped (default 3)",
           number("--attempts", {1, 100, "a whole number of tries", true, false},
                  [&](double v) { o.attempts = static_cast<int>(v); })},
          {"", "--symbol-cache", "MB",
           "memory for loaded symbol tables, least recently used out (default 32)",
           number("--symbol-cache", {1, 65536, "a number of megabytes", true, false},
                  [&](double v) { o.symbol_cache_bytes = static_cast<size_t>(v) << 20; })},
          {"", "--windows", "N", "stop after N windows (default: never)",
           number("--windows", {1, 1e9, "a whole number of windows", true, false},
                  [&](double v) { o.windows = v; })},
          symbol_dir_option(o.record.symbol_dirs),
          {"-v", "--verbose", "", "a line per window (samples, series, the gap between windows)",
           set(o.verbose, true)},
      },
      [](const std::string& v) { return "agent takes no operand ('" + v + "')"; }};
  if (auto exit = parse_options(command, args)) return *exit;
  if (o.pyroscope.empty() && o.parca.empty())
    return usage_error(kCommand, "where to? give --pyroscope URL, --pyroscope-ingest URL or --parca ADDR");
  if (!pids.empty() && !o.cgroup.empty()) return usage_error(kCommand, "give -p or --cgroup, not both");
  if (!pids.empty() || !o.cgroup.empty()) o.record.system_wide = false;
  o.record.pids = pids;
  return agent::run(o);
}

}  // namespace fxprof::cli
