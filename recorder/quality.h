// Data quality: whatever makes a recording miss part of the program or show some of it wrongly is said once
// after recording and kept in the profile, never silent.
//
// One mechanism for all of them: a QualityProblem is a line on stderr ("fxprof: LINE": what, where, why,
// the remedy) and an entry of the profile's meta (model::Meta::data_quality, the "Data quality" section of
// the Firefox Profiler's profile info: the label names the binary or process, the value counts it), both
// written by report_quality(). The cases (README, "Data quality"):
//  - A process that executes a setuid/setgid binary, or one the user cannot read, is no longer profiled:
//    the kernel removes the perf events of a task whose exec makes it non-dumpable (fs/exec.c,
//    perf_event_exit_task) and writes an EXIT record for it while it runs on. The reader sees that EXIT with
//    the process still alive and its /proc files owned by another user than its real one (what non-dumpable
//    tasks get); for the launched program (whose events were not enabled yet: no EXIT) the file's mode says
//    which and why.
//  - A binary deleted while it runs is read through a descriptor kept since its mapping was seen, or
//    /proc/PID/map_files when it was gone already (ProfileBuilder::keep_file), else named.
//  - Stacks that stopped at a damaged .eh_frame are named in the incomplete-stacks line
//    (recorder/unwind/report.h) and counted here.
//  - Lost records (the ring buffer overflowed): the mmap, comm and exec records lost with them make code
//    unknown or a child look like its parent; samples at addresses no known mapping covers are counted.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/profile.h"

namespace fxprof::recorder {

class Procfs;

struct QualityProblem {
  std::string label;     // the meta entry: what and where (the binary or process named)
  uint64_t count = 0;    // how many (processes, stacks, samples, records)
  std::string line;      // the stderr line ("" when another line already says it: meta entry only)
  uint32_t pid = 0;      // the process it happened in (0: the recording as a whole: see report_quality)
  uint64_t time_ns = 0;  // when it happened (0: known at the end, marked at the end of the recording)
  // A problem that happened in several processes (each exec not followed): a marker for each, on its own
  // process at its own time, instead of the one at (pid, time_ns).
  struct Mark {
    uint32_t pid = 0;
    uint64_t time_ns = 0;
    std::string label;
    uint64_t count = 1;
  };
  std::vector<Mark> marks;
};

// The one place problems are reported: each line on stderr, each entry in profile.meta.data_quality, and
// each a "Data quality" marker on the main thread of the process it happened in, at the time it did; the
// stack-walking counts (profile.meta.stack_walk, when set) a "Stack walking" marker at the end. A problem of
// the recording as a whole (pid 0), and the stack walking, are marked on the main thread of the process
// whose thread the printed URL opens (the busiest: most CPU time, then most samples), not on the first
// process's (a shell that only started the program). The Firefox
// Profiler's Gecko importer drops meta.extra, where the entries are also written, so the markers are how the
// front end shows them (marker chart and table, the timeline's overview, profiler-cli's `profile markers`).
void report_quality(model::Profile& profile, std::span<const QualityProblem> problems);

// Why this user cannot profile the program at `path` ("setuid root", "not readable by you (mode 0111)",
// "setgid group 44"), or "" when it can. The kernel stops profiling a process whose exec changes its
// effective user or group away from its real one (or runs a file it cannot read): root, too, loses a
// program setuid to another user or setgid to another group.
std::string unprofilable_reason(const std::string& path);

// The file execvp runs for `name`: `name` itself when it holds a '/', else the first executable match in
// PATH.
std::string command_path(const std::string& name);

// The real and effective users of a process, from the text of its /proc/PID/status; empty when it has no
// "Uid:" line.
std::vector<uint32_t> status_uids(std::string_view status);

// A process whose perf events the kernel removed at an exec: still running (not a zombie) when its EXIT
// record is read, its /proc files owned by another user than its real one. `binary`: its argv[0] (cmdline),
// "" while unknown.
struct UnfollowedExec {
  uint32_t pid = 0;
  std::string binary;
  std::string reason;    // unprofilable_reason(binary), or "" when the file cannot be found from here
  uint64_t time_ns = 0;  // when its events ended (the EXIT record's time; 0: the launched program)
};
// Read through `procfs` (recorder/host.h), as the builder reads everything else of /proc.
std::optional<UnfollowedExec> exec_not_followed(Procfs& procfs, uint32_t pid);
// A process whose EXIT came right after its exec, before the new program mapped anything: the kernel
// dropped our events at the exec, and the program may be gone already (a short-lived setuid child). Known by
// its `comm` only (the exec's name, at most 15 bytes); the reason is read from the file PATH finds for it.
UnfollowedExec exec_without_mappings(uint32_t pid, const std::string& comm);
// Reads the binary (and the reason) of `u` if still unknown: its exec may not have set up its arguments
// when exec_not_followed() ran.
void name_unfollowed(Procfs& procfs, UnfollowedExec& u);

// The problem for processes the kernel stopped profiling at an exec (one line for all of them).
QualityProblem unfollowed_problem(std::span<const UnfollowedExec> execs);

// The problem for `lost` records (PERF_RECORD_LOST): with them went samples and perhaps the mmap, comm and
// exec records that name code and processes; `unknown_samples` of `processes` processes ran in code no
// known mapping covers.
// `first_ns`: when the first was lost (0: unknown).
QualityProblem lost_records_problem(uint64_t lost, uint64_t unknown_samples, size_t processes,
                                    uint64_t first_ns = 0);

// The earliest start of a marker named `name` on any thread of `profile` (0 when there is none).
uint64_t earliest_marker(const model::Profile& profile, std::string_view name);

}  // namespace fxprof::recorder
