// `fxprof stat`: count events over a program's run (perf stat's output), or simulate its caches.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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

}  // namespace

// Long because its table of options is half of it: one row an option, in --help's order.
int cmd_stat(std::span<char*> args) {
  counters::StatOptions opt;
  bool json = false, cache_sim = false;
  uint64_t ll_size = 0;
  std::string output, events;
  const Command command{
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
             events += (events.empty() ? "" : ",") + v;
             return std::string();
           }},
          {"", "--cache-sim", "",
           "run COMMAND under Cachegrind (valgrind) instead: simulated I1, D1 and LL\n"
           "miss rates and the functions with the most D1 and LL misses. 20-100x\n"
           "slower; for machines without a PMU, or to see which code misses",
           set(cache_sim, true)},
          {"", "--ll-size", "BYTES",
           "with --cache-sim: simulate a last-level cache of BYTES (a power of two,\n"
           "at least 65536; 16-way) instead of this machine's",
           [&](const std::string& v) {
             auto n = parse_number(v);
             const auto b = n ? static_cast<uint64_t>(*n) : 0;
             if (!n || *n != static_cast<double>(b) || b < 65536 || b > (uint64_t{1} << 40) || (b & (b - 1)))
               return std::string("--ll-size needs a power of two of at least 65536 bytes");
             ll_size = b;
             return std::string();
           }},
          {"", "--json", "", "the same as JSON", set(json, true)},
          {"-o", "--output", "FILE", "write the report to FILE instead of standard error", store(output)},
          pid_option(opt.pids,
                     "count running processes (and what they start) until Ctrl+C, --duration\n"
                     "or their exit; per process = per PID given"),
          duration_option(opt.duration_s, "with -p: stop counting after SECONDS"),
      },
      nullptr};
  if (auto exit = parse_options(command, args, &opt.command)) return *exit;
  if (opt.command.empty() && opt.pids.empty())
    return usage_error(kCommand, "nothing to count: give a command or -p PID");
  if (!opt.command.empty() && !opt.pids.empty())
    return usage_error(kCommand, "give either a command or -p PID, not both");
  if (opt.duration_s > 0 && opt.pids.empty())
    return usage_error(kCommand, "--duration applies to -p; a launched program is counted until it exits");
  if (cache_sim && !opt.pids.empty())
    return usage_error(kCommand, "--cache-sim runs the program under Cachegrind: it cannot attach (-p)");
  if (ll_size && !cache_sim) return usage_error(kCommand, "--ll-size applies to --cache-sim");
  if (cache_sim && !events.empty())
    return usage_error(kCommand, "--cache-sim simulates the caches instead of counting events: drop -e");
  if (!events.empty()) {
    auto ev = counters::find_events(events);
    if (!ev) {
      std::fprintf(stderr, "fxprof stat: %s\n", ev.error().c_str());
      return 2;
    }
    opt.events = std::move(*ev);
  }
  // A report file we cannot write is found before the program runs.
  UniqueFd out_fd;
  if (!output.empty()) {
    out_fd.reset(::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out_fd.valid()) {
      std::fprintf(stderr, "fxprof: cannot write %s: %s\n", output.c_str(), errno_text(errno).c_str());
      return 1;
    }
  }
  auto emit = [&](const std::string& text) {
    if (out_fd.valid()) {
      if (::write(out_fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        std::fprintf(stderr, "fxprof: cannot write %s: %s\n", output.c_str(), errno_text(errno).c_str());
    } else {
      std::fputs(text.c_str(), stderr);
    }
  };

  if (cache_sim) {
    std::fputs(
        "fxprof: --cache-sim: running the program under Cachegrind, which simulates every memory "
        "access: expect it 20-100x slower than usual\n",
        stderr);
    auto sim = counters::run_cache_sim(opt.command, ll_size);
    if (!sim) {
      std::fprintf(stderr, "fxprof: %s\n", sim.error().c_str());
      return sim.exit_code();
    }
    emit(json ? counters::format_cache_sim_json(*sim) : counters::format_cache_sim(*sim));
    return sim->exit_status;
  }

  auto r = counters::run_stat(opt);
  if (!r) {
    std::fprintf(stderr, "fxprof: %s\n", r.error().c_str());
    return r.exit_code();
  }
  for (const std::string& n : r->notices) std::fprintf(stderr, "fxprof: %s\n", n.c_str());
  emit(json ? counters::format_stat_json(*r) : counters::format_stat(*r));
  return r->exit_status;
}

}  // namespace fxprof::cli
