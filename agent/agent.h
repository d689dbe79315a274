// fxprof agent: continuous profiling (`fxprof agent`). The machine (or some processes) is sampled at a low
// rate without end, cut into windows, and each window is symbolicated here and pushed as pprof to a fleet
// engine (Grafana Pyroscope, Parca) by share/'s pushers. A driver over the existing parts, no recorder or
// pprof writer of its own:
//
//   recording thread (main)                         sender (one thread)
//   recorder::record(-a | -p | cgroup's pids,   ->  passes::run (one Symbolizer for all windows)
//     window_s = --every): on_window per window     sinks::write_pprof per process and profile type
//                                                   share:: push, retried with backoff
//
// One recording lasts many windows (recorder.h Options::window_s): the events and ring buffers are opened
// once, processes that start later are followed through their fork/comm/mmap/exit records as `record -a`
// follows them, and at each window's end its samples move into a small profile of their own (only the
// frames and stacks they use) that is offered to the sender; the recording forgets them, and the state of
// processes that ended. Windows are contiguous (each one's `from` is the previous one's `until`) and
// nothing between them goes unsampled. A recording is renewed after kRenewWindows windows (what it interned
// is then freed), when a process joins the --cgroup from outside, or when it fails.
//
// What it costs (bench/agent.sh, this 2-vCPU VM, both cores busy; README "fxprof agent"): memory was
// mostly symbols, not recording state: heaptrack of the old agent (a recording per window) had 135 MB of
// heap at its peak, 90 MB of it libelf's copies of the sections of fxprof's own unstripped binary (its
// .strtab, its DWARF) loaded to name the agent's own samples. The agent leaves its own process out.
//
// Memory bounds (designed for a process that runs for days):
//  - the recording: CPU samples of one window at most rate x CPUs x window (19 Hz, 8 CPUs, 10 s: 1,520, 16
//    bytes each); off-CPU (--off-cpu) adds at most a sample per thread per interval it was blocked; ring
//    buffers of kRingBytes per CPU (the recorder's own are sized for 4 kHz: 16 MiB a CPU with -a).
//  - what the recording keeps between windows (recorder/window.h): the strings, frames and stacks a window
//    interned are emptied at its cut (they grew by ~3 MB a minute beside a test suite, every short-lived
//    program's addresses, to 180-240 MB an hour); the processes alive with their threads, libraries and
//    unwind tables stay, and of each process that ended an entry of ~200 bytes (its name freed) until the
//    recording is renewed (kRenewWindows: 10,000 programs an hour hold 2 MB). The binaries no live process
//    maps any more are unmapped and closed at each cut (every program a test suite built stayed mapped
//    for the hour: 60-120 MB of file pages); one mapped again is loaded again. With --off-cpu the stacks of
//    open waits outlive a window and the model is kept as before: it grows until the renewal.
//  - symbols: the symbolizer's library cache is bounded by --symbol-cache (LRU, symbolizer/cache.h); the
//    list of libraries it was told about grows with each distinct binary (a package upgrade adds some), so
//    the symbolizer is replaced after kMaxKnownLibs of them (its libraries are loaded again when next used).
//  - unsent windows: the one being named or sent and at most Sender::kMaxWaiting (3) waiting; a window
//    offered when 3 wait drops the oldest (counted). A window is tried --attempts times with backoff (1 s,
//    2 s, 4 s... up to the window's length), then dropped with a count on stderr.
// SIGINT/SIGTERM/SIGHUP end the current window at once; it is symbolicated and sent (each unsent window
// tried once more, without waiting between tries) and the agent exits 0.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "recorder/recorder.h"
#include "share/share.h"

namespace fxprof::agent {

inline constexpr size_t kMaxKnownLibs = 4096;
// A recording lasts at most this many windows (an hour at 10 s): what it interns (frames, stacks) and the
// small entry each process that ever ran keeps are then freed, at the cost of one attach of the machine.
// (30 windows, with a fixed mmap threshold and two malloc arenas, cost more CPU and RSS beside a loaded
// machine's test suite: 8.0% of a core and 135 MB on average against 7.0% and 105 MB.)
inline constexpr uint64_t kRenewWindows = 360;
inline constexpr uint64_t kRingBytes = 1 << 20;  // per CPU (recorder Options::buffer_bytes)
// The unwinder's mapped file pages kept between windows (agent.cpp release_file_pages), in kB.
inline constexpr unsigned long kFilePagesKb = 32 << 10;
// Memory is given back (file pages past kFilePagesKb, malloc's free pages) at most this often: doing it every
// window cost a fifth of the agent's CPU (madvise's TLB flushes on every CPU, then the faults that bring the
// pages back), for an RSS that a minute's growth hardly moves.
inline constexpr uint64_t kGiveBackEveryMs = 60000;

struct Options {
  recorder::Options record;  // system_wide, or pids; frequency_hz; off_cpu; symbol_dirs
  std::string cgroup;        // --cgroup PATH: the processes in PATH/cgroup.procs at each window's start
  double every_s = 10;       // --every
  std::string pyroscope, parca;
  bool pyroscope_ingest = false;  // --pyroscope-ingest: Pyroscope's /ingest rather than its Push API
  share::Labels labels;           // --label k=v, on every series
  std::vector<std::string> headers;
  std::string host;  // the host label (default: the machine's name)
  size_t symbol_cache_bytes = size_t{32} << 20;
  int attempts = 3;    // tries per window before it is dropped
  double windows = 0;  // stop after this many windows (0: never); for tests and the bench
  bool verbose = false;
};

// Runs until a signal (exit status 0) or, with Options::windows, that many windows; 1 with one line on
// stderr when the first window cannot be recorded (no permission, no such process).
int run(const Options& options);

// A window's series: for each process with samples, a CPU series (process_cpu) and, with off-CPU samples,
// an off-CPU one (off_cpu), each labelled {__name__, service_name=<process name>, host, pid, labels...}
// and holding that process's gzipped pprof. `ingest`: one series per process with every value (/ingest
// takes one profile per request and names its types itself).
std::vector<share::Series> window_series(const model::Profile& profile, const Options& options, bool ingest);

}  // namespace fxprof::agent
