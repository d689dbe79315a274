// `fxprof stat`: count events over a program's run (perf stat's output), or simulate its caches.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/terminal.h"
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
  uint32_t repeat = 1;
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
          {"", "--json", "", "the same as JSON, on standard output", set(a.json, true)},
          {"-o", "--output", "FILE",
           "write the report to FILE instead (\"-\": standard output; default: the\n"
           "text on standard error, as perf stat, and --json on standard output)",
           store(a.output)},
          {"-r", "--repeat", "N",
           "run COMMAND N times (as perf stat -r): the mean of each count and its\n"
           "relative standard deviation, ( +- x% ); no per-process counts",
           number("--repeat", {1, 10000, "a number of runs", true},
                  [&](double n) { a.repeat = static_cast<uint32_t>(n); })},
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
  if (a.repeat > 1 && !opt.pids.empty())
    return usage_error(kCommand, "--repeat runs a command: it cannot attach (-p)");
  if (a.repeat > 1 && a.cache_sim)
    return usage_error(kCommand, "--repeat and --cache-sim do not go together");
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

// Where the report goes: -o FILE, opened before the program runs (a file we cannot write is found then; the
// one output writer, base/fd.h AtomicFile, decides what the path means: `-o -` is standard output); else the
// text on standard error (as perf stat: the program's own output stays apart) and --json on standard output
// (for a pipe into jq).
class ReportOut {
 public:
  ReportOut(const std::string& path, bool json) : stdout_(json) {
    if (path.empty()) return;
    auto f = AtomicFile::create(path);
    if (f)
      file_.emplace(std::move(*f));
    else
      error_ = f.error();
  }
  const std::string& error() const { return error_; }
  void emit(const std::string& text) {
    if (!file_) {
      std::fputs(text.c_str(), stdout_ ? stdout : stderr);
      std::fflush(stdout_ ? stdout : stderr);
      return;
    }
    Status s = ::write(file_->fd(), text.data(), text.size()) == static_cast<ssize_t>(text.size())
                   ? file_->commit()
                   : Err("cannot write the report: " + errno_text(errno));
    if (!s) say(s.error());
  }

 private:
  const bool stdout_;
  std::optional<AtomicFile> file_;
  std::string error_;
};

}  // namespace

// Parse, open the report's file, then count (or simulate the caches) and report.
int cmd_stat(std::span<char*> args) {
  StatArgs a;
  if (auto exit = parse_stat_args(args, a)) return *exit;
  ReportOut out(a.output, a.json);
  if (!out.error().empty()) {
    say(out.error());
    return 1;
  }
  if (a.cache_sim) {
    std::fputs(
        "fxprof: --cache-sim: running the program under Cachegrind, which simulates every memory "
        "access: expect it 20-100x slower than usual\n",
        stderr);
    auto sim = counters::run_cache_sim(a.opt.command, a.ll_size);
    if (!sim) {
      say(sim.error());
      return sim.exit_code();
    }
    out.emit(a.json ? counters::format_cache_sim_json(*sim) : counters::format_cache_sim(*sim));
    return sim->exit_status;
  }

  // Attached: said at once, so that a user (or a test's handshake) knows counting has started.
  a.opt.attached = [&] {
    say("counting " + (a.opt.pids.size() == 1 ? "pid " + std::to_string(a.opt.pids[0]) : "the processes") +
        " (Ctrl+C stops)");
  };
  std::vector<counters::StatResult> runs;
  for (uint32_t i = 0; i < a.repeat; ++i) {
    auto r = counters::run_stat(a.opt);
    if (!r) {
      say(r.error());
      return r.exit_code();
    }
    if (i == 0)  // the same notices every run: said once
      for (const std::string& n : r->notices) say(n);
    runs.push_back(std::move(*r));
  }
  const counters::StatResult r = counters::mean_of_runs(std::move(runs));
  out.emit(a.json ? counters::format_stat_json(r) : counters::format_stat(r));
  return r.exit_status;
}

}  // namespace fxprof::cli
