// `fxprof stat`: count events over a program's run (perf stat's output), or simulate its caches.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>

#include "base/fd.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "counters/cachesim.h"
#include "counters/events.h"
#include "counters/stat.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof stat [OPTIONS] [--] COMMAND [ARGS...]\n"
    "       fxprof stat [OPTIONS] -p PID[,PID...]\n"
    "\n"
    "Counts events over COMMAND's run (every thread and process it starts), in total and per process, and\n"
    "prints them as perf stat does, with the derived figures (CPUs utilized, IPC, miss rates) and one\n"
    "sentence each on what they suggest. fxprof exits with the program's exit status. Without a hardware\n"
    "PMU (virtual machines, containers, CI runners) it says so once and counts the software events.\n"
    "\n";

constexpr std::string_view kCommand = "stat";

// What stat's command line says.
struct StatArgs {
  counters::StatOptions opt;
  bool json = false, cache_sim = false;
  uint64_t ll_size = 0;
  std::string output, events;
};

// stat's table. Long because it is the table: one row an option, in --help's order.
Command stat_command(StatArgs& a) {
  return Command{
      kCommand,
      kUsage,
      {
          heading("Options:"),
          {"-e", "--event", "EVENT[,EVENT...]",
           "what to count (default: task-clock, context-switches, cpu-migrations,\n"
           "page-faults, minor-faults, major-faults, and with a PMU cycles,\n"
           "instructions, cache-references, cache-misses, branches, branch-misses).\n"
           "Also cpu-clock, bus-cycles and tracepoints CATEGORY:NAME\n"
           "(syscalls:sys_enter_write). An event this machine lacks is printed as\n"
           "<not supported>, never as 0",
           [&](const std::string& v) {
             a.events += (a.events.empty() ? "" : ",") + v;
             return std::string();
           }},
          {"", "--cache-sim", "",
           "run COMMAND under Cachegrind (valgrind) instead: simulated I1, D1 and LL\n"
           "miss rates and the functions with the most D1 and LL misses. 20-100x\n"
           "slower; for machines without a PMU, or to see which code misses",
           set(a.cache_sim, true)},
          {"", "--ll-size", "BYTES",
           "with --cache-sim: simulate a last-level cache of BYTES (a power of two,\n"
           "at least 65536; 16-way) instead of this machine's",
           [&](const std::string& v) {
             std::string error;
             auto n = parse_number("--ll-size", v, {65536, 0x1p40, "a power of two of bytes", true}, error);
             if (!n) return error;
             const auto b = static_cast<uint64_t>(*n);
             if (b & (b - 1)) return "--ll-size: expected a power of two of bytes, got '" + v + "'";
             a.ll_size = b;
             return std::string();
           }},
          {"", "--json", "", "the same as JSON", set(a.json, true)},
          {"-o", "--output", "FILE", "write the report to FILE instead of standard error", store(a.output)},
          pid_option(a.opt.pids,
                     "count running processes (and what they start) until Ctrl+C, --duration\n"
                     "or their exit; per process = per PID given"),
          duration_option(a.opt.duration_s, "with -p: stop counting after SECONDS"),
      },
      nullptr};
}

// Parses and checks the arguments, events looked up: nullopt to go on, else the exit status.
std::optional<int> parse_stat_args(std::span<char*> args, StatArgs& a) {
  counters::StatOptions& opt = a.opt;
  if (auto exit = parse_options(stat_command(a), args, &opt.command)) return *exit;
  if (opt.command.empty() && opt.pids.empty())
    return usage_error(kCommand, "nothing to count: give a command or -p PID");
  if (!opt.command.empty() && !opt.pids.empty())
    return usage_error(kCommand, "give either a command or -p PID, not both");
  if (opt.duration_s > 0 && opt.pids.empty())
    return usage_error(kCommand, "--duration applies to -p; a launched program is counted until it exits");
  if (a.cache_sim && !opt.pids.empty())
    return usage_error(kCommand, "--cache-sim runs the program under Cachegrind: it cannot attach (-p)");
  if (a.ll_size && !a.cache_sim) return usage_error(kCommand, "--ll-size applies to --cache-sim");
  if (a.cache_sim && !a.events.empty())
    return usage_error(kCommand, "--cache-sim simulates the caches instead of counting events: drop -e");
  if (!a.events.empty()) {
    auto ev = counters::find_events(a.events);
    if (!ev) {
      std::fprintf(stderr, "fxprof stat: %s\n", ev.error().c_str());
      return 2;
    }
    opt.events = std::move(*ev);
  }
  return std::nullopt;
}

// Where the report goes: -o FILE, opened before the program runs (a file we cannot write is found then),
// else standard error.
class ReportOut {
 public:
  explicit ReportOut(const std::string& path) : path_(path) {
    if (!path_.empty()) fd_.reset(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  }
  bool failed() const { return !path_.empty() && !fd_.valid(); }
  void emit(const std::string& text) {
    if (fd_.valid()) {
      if (::write(fd_.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        std::fprintf(stderr, "fxprof: cannot write %s: %s\n", path_.c_str(), errno_text(errno).c_str());
    } else {
      std::fputs(text.c_str(), stderr);
    }
  }

 private:
  const std::string& path_;
  UniqueFd fd_;
};

}  // namespace

// Parse, open the report's file, then count (or simulate the caches) and report.
int cmd_stat(std::span<char*> args) {
  StatArgs a;
  if (auto exit = parse_stat_args(args, a)) return *exit;
  ReportOut out(a.output);
  if (out.failed()) {
    std::fprintf(stderr, "fxprof: cannot write %s: %s\n", a.output.c_str(), errno_text(errno).c_str());
    return 1;
  }
  if (a.cache_sim) {
    std::fputs(
        "fxprof: --cache-sim: running the program under Cachegrind, which simulates every memory "
        "access: expect it 20-100x slower than usual\n",
        stderr);
    auto sim = counters::run_cache_sim(a.opt.command, a.ll_size);
    if (!sim) {
      std::fprintf(stderr, "fxprof: %s\n", sim.error().c_str());
      return sim.exit_code();
    }
    out.emit(a.json ? counters::format_cache_sim_json(*sim) : counters::format_cache_sim(*sim));
    return sim->exit_status;
  }

  auto r = counters::run_stat(a.opt);
  if (!r) {
    std::fprintf(stderr, "fxprof: %s\n", r.error().c_str());
    return r.exit_code();
  }
  for (const std::string& n : r->notices) std::fprintf(stderr, "fxprof: %s\n", n.c_str());
  out.emit(a.json ? counters::format_stat_json(*r) : counters::format_stat(*r));
  return r->exit_status;
}

}  // namespace fxprof::cli
