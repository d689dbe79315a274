// fxprof recorder: a perf.data file as a source of the profile builder (`fxprof import`).
//
// The file's records (perf/data_file.h: time-ordered, decoded by the file's own event attributes) are fed to
// the same ProfileBuilder the live recorder and the capture replay feed (driver/driver.h's RecordSink), in
// rounds, by the same driver (driver/driver.h: the file is one of its sources, driver/sources.h), so a
// perf.data gives the profile `record` would have: processes and threads from perf's COMM, FORK and EXIT
// records (perf synthesizes them, and the MMAP2 records, for processes that ran before the recording),
// libraries from MMAP2, stacks from the kernel's callchain (`perf record -g`) or unwound by fxprof's unwinder
// from the copied registers and stack (`--call-graph dwarf`). The process is gone: /proc answers only the
// names the file's COMM records gave, and the kernel's function names when the file was recorded on the
// running kernel (its build ID, or its release and host name, match).
//
// The scheduler's tracepoints (-e sched:sched_switch -e sched:sched_waking) make `record --off-cpu`'s waits:
// sched_switch's samples are the switch-outs (and the switches, without --switch-events), sched_waking's the
// wakeups, each with its sample's user stack as the waker's (the lock holder's, with --call-graph dwarf).
//
// Other events (perf record -e cpu-clock,page-faults): the chosen event's samples are the threads' samples;
// with ImportOptions::event_tracks each other event's are a thread of their own per thread, "NAME (EVENT)",
// written as a track after the process's recorded threads (model::SyntheticThread, as the critical-path
// tracks are): the front end shows their call tree, flame graph and stack chart, and no sink totals them
// with the CPU samples (Gecko v36 has no sample types or weights to tell them apart in one thread).
//
// Binaries are matched by build ID: a library on disk whose build ID differs from the file's build-ID
// table keeps the recorded ID (so the symbolizer looks for the right file and never names frames from the
// wrong one) and gets a data-quality line.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/profile.h"
#include "perf/data_file.h"

namespace fxprof::recorder {

struct ImportOptions {
  std::vector<std::string> symbol_dirs;      // as --symbol-dir: where the unwinder also looks for debug files
  std::vector<uint32_t> pids, tids;          // only these processes / threads (empty: all)
  std::optional<uint64_t> start_ns, end_ns;  // only samples in [start, end] (the file's clock)
  std::string event;                         // the event whose samples are the profile's ("": the first)
  bool verbose = false;
  // The other events' samples too, each thread's as a thread of its own, "NAME (EVENT)" (Imported::tracks):
  // for the front end (`import`, `load`); the sinks want the profile's event alone.
  bool event_tracks = false;
};

struct ImportStats {
  uint64_t samples = 0;       // samples in the profile
  uint64_t file_samples = 0;  // samples of the chosen event in the file (before the filters)
  uint32_t threads = 0, processes = 0;
  double duration_s = 0;
  uint64_t lost_records = 0;
  std::string event;  // the chosen event's name
  // Every event with samples: its name and how many (the chosen one among them).
  std::vector<std::pair<std::string, uint64_t>> events;
  bool dwarf = false;         // stacks unwound from copied stacks (--call-graph dwarf)
  uint64_t out_of_order = 0;  // records the file held out of time order (kept, sorted)
  uint64_t dropped = 0;       // perf records fxprof does not read (AUX, tracing data)
  bool kernel_names = false;  // the kernel's function names were available
  // sched:sched_switch (and sched_wakeup or sched_waking) in the file: off-CPU waits, as record --off-cpu.
  uint64_t off_cpu_samples = 0, off_cpu_spans = 0;
  uint64_t switch_outs = 0, switch_ins = 0;  // of sched_switch: without perf's switch records, the ins
  bool switch_records = false;               // are only seen with -a (perf sched record)
  // With event_tracks: each other event's samples in its tracks (the idle task's are left out).
  std::vector<std::pair<std::string, uint64_t>> tracked;
};

struct Imported {
  model::Profile profile;
  ImportStats stats;
  // With event_tracks: the other events' threads, (process, thread) indices into the profile, after every
  // recorded thread of their process: passes::Options::source_tracks takes them out of the model.
  std::vector<std::pair<size_t, size_t>> tracks;
};

Result<Imported> import_perf_data(const perf::DataFile& file, const ImportOptions& options);

// "START,END" in seconds of the file's clock (as `perf script` prints times; either may be empty) into
// `options`; an error for anything else.
Status parse_time_range(const std::string& text, ImportOptions& options);

}  // namespace fxprof::recorder
