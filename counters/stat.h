// fxprof counters: `fxprof stat`, counting perf events over a program's run, in total and per process.
//
// Launch mode: fork; the child waits on a pipe while one counting event per (event, CPU) is opened on it
// (inherit: every thread and process it starts is counted; enable_on_exec: fxprof's own fork is not), then
// execs. Each CPU's events write into one small ring buffer (PERF_EVENT_IOC_SET_OUTPUT) and carry
// inherit_stat: when a thread exits the kernel writes its own counts there (PERF_RECORD_READ, with its
// pid), and its fork/comm/exit records name the processes. Those buffers are read the way `record` reads
// its own: by the driver (driver/driver.h), through the perf buffers' source (driver/sources.h), here into
// a counting sink (counters/count_sink.h) that sums each process's counts, a round each time the wait for
// the program wakes (at the latest every 100 ms) and once at its exit. The totals are the events' values read
// at the end; the launched process's own share is the total minus what its descendants reported. Attach mode
// (-p): one event per (event, thread) of each given process (inherit for what it starts), read at Ctrl+C,
// --duration or when they all exit; per process = per given pid. No buffers: no records. Hardware events that
// the PMU multiplexes are scaled by enabled/running time, as perf does, and flagged. Cost: a few perf events
// per CPU and a record per exiting thread; nothing sampled. Below the driver, in perf/, is what stat shares
// with `record` too: the event attributes, the ring buffers, the record decoder, the launcher and the signal
// guard.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "counters/events.h"

namespace fxprof::counters {

struct StatOptions {
  std::vector<std::string> command;  // launch mode
  std::vector<int> pids;             // attach mode
  double duration_s = 0;             // attach mode: stop after this long (0: Ctrl+C or exit)
  std::vector<EventSpec> events;     // empty: default_stat_events(have_pmu())
  std::function<void()> attached;    // attach mode: called once every thread is counted
};

struct Count {
  bool available = false;    // false: the event could not be opened here (no PMU...): never shown as 0
  uint64_t value = 0;        // scaled when multiplexed
  double running = 1.0;      // fraction of the time the counter ran (hardware multiplexing), 1 = always
  bool kernel_only = false;  // unavailable because it happens in the kernel and only user space is counted
};

struct ProcessCounts {
  uint32_t pid = 0;
  std::string name;
  std::vector<uint64_t> values;  // parallel to StatResult::events
};

struct StatResult {
  std::vector<std::string> command;  // what was run (or "pid N,M")
  std::vector<EventSpec> events;
  std::vector<Count> total;              // parallel to events
  std::vector<ProcessCounts> processes;  // by first appearance; empty in attach mode without data
  bool pmu = false;
  bool user_only = false;  // exclude_kernel (perf_event_paranoid 2 without root)
  double elapsed_s = 0;
  int exit_status = 0;               // launch mode: the program's (128+N when signal N killed it)
  std::vector<std::string> notices;  // said once each on stderr by the CLI
  // -r N (perf stat -r): the counts and elapsed time are means over `runs` runs, each event's relative
  // standard deviation in `stddev_percent` (parallel to events; empty for one run), no per-process counts.
  uint32_t runs = 1;
  std::vector<double> stddev_percent;
};

// Folds the results of N runs of one command into their means (see StatResult::runs).
StatResult mean_of_runs(std::vector<StatResult> runs);

// Runs (or attaches to) the program and counts. An exec failure is an Error with exit_code 127.
Result<StatResult> run_stat(const StatOptions& options);

// perf-stat-style text: the counts, derived figures after '#', then one sentence per figure on what it
// suggests; a per-process section when more than one process ran.
std::string format_stat(const StatResult& r);
// The same as JSON: {command, exitStatus, elapsedSeconds, pmu, userOnly, events[{name, value|null,
// unit, available, running}], derived[{name, value, text}], processes[{pid, name, counts{}}]}.
std::string format_stat_json(const StatResult& r);

// The derived figures and their sentences (shared by both formats).
struct Derived {
  std::string event;  // the line it annotates ("task-clock", "instructions", ...)
  std::string name;   // "CPUs utilized", "insn per cycle", ...
  double value = 0;
  std::string annotation;  // after '#' on the event's line, e.g. "0.98 CPUs utilized"
  std::string sentence;    // what it suggests
};
std::vector<Derived> derive(const StatResult& r);

}  // namespace fxprof::counters
