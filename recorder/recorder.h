// fxprof recorder: launches or attaches to processes, samples every thread of every process with perf events,
// and builds the in-memory profile (model/profile.h).
//
// Data flow (all in the calling thread; no other thread is needed to keep up), as the passes of
// recorder.cpp's Session::run (plan, start, read, drain, finish, summarize; -v prints each one's time):
//   launch: fork -> the child blocks on a pipe -> one perf event per CPU on the child (inherit,
//           enable_on_exec) -> resume -> execvp (exec errors come back on a CLOEXEC pipe: exit code 127)
//   attach: one event per (thread, CPU) of /proc/PID/task, all writing into the same per-CPU ring buffer
//           (PERF_EVENT_IOC_SET_OUTPUT); /proc/PID/maps read after the events run, then /proc/PID/task again
//   loop:   poll(signalfd, pidfds, ring buffers; 25 ms) -> read every buffer up to data_head (acquire),
//           merge the records of all buffers by time, feed them to the ProfileBuilder, release data_tail
//           (release store). The builder unwinds each DWARF sample at once (recorder/unwind) and interns the
//           addresses, so a 32 KiB stack copy lives only in the ring buffer.
//   end:    program exit (pidfd), --duration, or SIGINT/SIGTERM in attach mode -> disable, drain, name the
//           kernel frames seen from /proc/kallsyms (once) -> Recording.
//   The builder sees the system only through recorder/host.h (records in rounds, /proc answers), so
//   Options::capture_path can write both to a file that recorder/capture.h replays into the same profile.
//   heap:   Options::heap starts the heap pipe (recorder/sources.h) before the fork; its events are folded
//           on threads of its own and go into the profile at the end, before record() returns.
//
// Numbers that shaped it (this 2-vCPU VM, measurements.md):
//  - No PMU here: hardware cycles are tried, cpu-clock is used (`--verbose` says so). A sample costs the
//    sampled thread ~20 us, so 1 kHz is ~2 % per busy thread; the kernel caps the rate at
//    perf_event_max_sample_rate (100 kHz) and we lower a higher request to it with one notice.
//  - Ring buffers: a DWARF sample is stack_size + ~1 KiB (33 KiB by default: 33 MB/s per busy CPU at 1 kHz),
//    an FP sample ~150 B. Buffers hold ~32 DWARF samples (2 MiB per CPU as root) and wake the reader at a
//    quarter full; unprivileged users' rings are locked memory: perf_event_mlock_kb per CPU (516 KiB) for
//    all their processes, then RLIMIT_MEMLOCK (8 MiB on Debian) on top, so their buffers are 4 MiB per CPU
//    on 2 CPUs (~120 DWARF samples; 512 KiB, ~15 samples, lost 6-10% at load 4). mmap falls back to halves
//    on EPERM, never fails where a smaller buffer fits. At 1 and 4 kHz nothing is lost; at 10 kHz with DWARF
//    on two busy threads the reader falls behind and the losses (PERF_RECORD_LOST) become "LostRecords"
//    markers on the thread that was running.
//  - Start-up: one fork, a probe event, one event and one mmap per CPU: 1-5 ms from record() to the exec.
//    Exit: the pidfd wakes us at once; /proc/kallsyms (120k lines, ~40 ms of kernel time, 150+ ms on a
//    loaded VM) is read by a thread while the program runs (kallsyms.h), so the end only looks names up.
//    (perf record spends 0.24 s at start and up to 1 s at exit here.) Reading, unwinding and interning cost
//    the recording thread a few % of one CPU for the demo at 1 kHz with DWARF: ~126 ms for 1,330 samples in 2
//    s, kallsyms included (Stats::reader_cpu_ms; --verbose prints it).
//  - Kernel frames need perf_event_paranoid <= 1 (or root). At 2 an ordinary user's own program is recorded
//    user-space only (exclude_kernel, one notice); at 3, or when seccomp refuses perf_event_open, the error
//    names the setting and the fix.
//  - Processes: inherit follows every fork/vfork/clone/posix_spawn; an exec starts a new model::Process for
//    the pid unless the old entry has no samples yet (fork+exec would otherwise leave an empty track per
//    child); a fork without exec copies its parent's libs. Threads are named by comm, renames included.
//  - Call graphs: Dwarf (default) asks for REGS_USER + STACK_USER *and* the kernel's CALLCHAIN: the kernel
//    part gives the kernel frames, the user part is spliced in where the DWARF walk was cut by the copy's
//    end; otherwise the stack gets a "(stack truncated)" root rather than a wrong one. FramePointer asks
//    for CALLCHAIN only (cheapest, but wrong through Debian's libc/libstdc++ which have no frame pointers).
//  - Off-CPU (Options::off_cpu, the CLI's default): a context-switches event (period 1) per CPU beside the
//    CPU event, into its own ring buffers (4x larger, waking the reader at a quarter: waking it every ~15
//    switches preempted the program and lost 40k of 60k records at 100k switches/s), sampling the outgoing
//    thread with the same callchain plus RDI and an 8 KiB user stack copy (--off-cpu-stack-size, perf's
//    default; CPU samples copy 32 KiB); the CPU event's switch records time the spans (tracker.h
//    OffCpuConfig, offcpu.h for the reasons). The copy is most of the cost, paid in the program's time at
//    every switch: program kernel time, 100k switches, this VM: +7 us per switch with 8 KiB, +10 us with
//    32 KiB, +4 us with 4 KiB; the reader's unwinding was not the cost (lazy since: only stacks a sample or
//    marker uses, 5-8 %), nor the eBPF waker or the user callchain (within the noise without them).
//    bench/offcpu.sh, in one run each: ~30k switches/s costs the program 1.0-1.2x with 0 lost (perf
//    record -e context-switches -c 1 --call-graph dwarf: 1.0-1.2x, up to 1,100 lost; 32 KiB copies:
//    1.4-1.7x); ~180k/s: 2.1-2.9x, 0-2,100 lost (perf: 2.3-3.2x, dropping up to 40 % of its samples). A
//    CPU-bound program
//    (~150 switches/s): its CPU time with off-CPU capture within 2 % of --cpu-only's. Paranoid 2 without
//    root: the event is refused, the switch records still come (tested), so waits are markers without stacks.
//    As root an eBPF program on sched_waking (waker.h) names the thread that woke each wait, and for a futex
//    wake (an unlock) copies the waker's registers and 16 KiB of its stack (stdio unlocks under an 8 KiB
//    buffer), unwound as a sample's: a Wakeup marker on the holder's thread, the Lock wait's "Held by" once
//    named (passes/locks.h). Its ring buffer is drained before each round, so the round's records describe
//    the mappings; only wakes that end a wait with a marker are unwound. Where it cannot load, one line says
//    so.
//  - Signals: SIGINT/SIGTERM are blocked during record() and read from a signalfd; in launch mode a signal
//    sent to fxprof alone is forwarded to the program (the terminal's Ctrl-C reaches both), and fxprof waits
//    for the program and keeps its exit status (128+signal when killed), crashes included.
#pragma once

#include <signal.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "counters/events.h"
#include "heap/heap.h"
#include "model/profile.h"
#include "perf/launcher.h"

namespace fxprof::recorder {

enum class CallGraph { Dwarf, FramePointer };

struct Recording;

struct Options {
  std::vector<std::string> command;  // launch mode: argv of the program to run
  std::vector<int> pids;             // attach mode: running processes
  // -a: every process on the machine (recorder_system.cpp), until Ctrl+C, --duration or the end of
  // `command` when one is given (it runs unfollowed: the system-wide events see it). Root or
  // perf_event_paranoid <= 0.
  bool system_wide = false;
  bool per_cpu = false;        // -a --per-cpu: a track per CPU showing which thread ran on it
  double frequency_hz = 1000;  // -F/--freq
  CallGraph call_graph = CallGraph::Dwarf;
  uint32_t stack_size = 32768;  // --stack-size: bytes of user stack copied per sample (DWARF mode)
  uint64_t buffer_bytes = 0;    // --buffer-size: ring buffer per CPU (0: ~32 samples' worth, see below)
  double duration_s = 0;        // --duration: 0 = until the program exits (launch) or Ctrl-C (attach)
  bool verbose = false;
  std::vector<std::string> symbol_dirs;  // --symbol-dir: also searched for debug files (.debug_frame)
  // Off-CPU time (wall-clock profiles; `fxprof record` turns it on unless --cpu-only): blocked and preempted
  // time as samples with the blocking stack and a `[blocked: reason]` leaf, and a marker per span of at
  // least off_cpu_threshold_ms ("Lock wait" with the lock's address for futex waits). Without the right
  // to sample context switches (perf_event_paranoid 2, not root) the spans are markers without stacks and
  // one notice says so.
  bool off_cpu = false;
  double off_cpu_threshold_ms = 1.0;
  // --off-cpu-stack-size: bytes of user stack copied per switch-out (DWARF mode). The kernel copies it at
  // every context switch of the program, in the program's time: 8 KiB (perf's default) costs ~7 us per
  // switch here, 32 KiB ~10 us (recorder.h notes).
  uint32_t off_cpu_stack_size = 8192;
  // --wakers-from-start: the program starts once the eBPF waker tracer (off-CPU, root) is attached, so
  // that every wake is named; by default it starts at once and the tracer attaches beside it (waker.h's
  // WakerLoader: its load took 627 ms at load 8), and a data-quality line says how long it ran untraced.
  bool wakers_from_start = false;
  // -e: sample this event (software, hardware, tracepoint) instead of the clock, one sample every
  // `event_period` events (0: the event's own default period, counters/events.h). Off-CPU samples do not
  // mix with it: the CLI turns off_cpu off.
  std::optional<counters::EventSpec> event;
  uint64_t event_period = 0;
  // --heap (launch mode only): the program's allocations and frees through the heap library, a source of
  // the recording (recorder/sources.h, heap_source): its rows and Memory counters are in the profile and
  // its data-quality lines among the recording's; Stats::heap_incomplete says what it missed.
  std::optional<heap::Options> heap;
  // Not a CLI option: write what the builder was fed (records, /proc answers) to this file, for
  // recorder/capture.h's replay (the tests record, capture, replay and compare).
  std::string capture_path;
  // Not a CLI option: called on the recording thread once per binary (an ELF file), with its lib, when a
  // sample's stack first goes through it, so the caller can load its symbols while the program runs (only
  // those of binaries the samples use: not when mapped, python3 maps 11 and runs code in 4-7).
  std::function<void(const model::Lib&)> on_binary_sampled;
  // Not a CLI option: called once the events run (after the start pass), so that a caller can say the
  // recording is under way (`fxprof agent -v`: the tests wait for that line).
  std::function<void()> on_started;
  // Not a CLI option: no notices or data-quality lines on stderr (`fxprof agent` after its first window:
  // it says each data-quality problem once, from profile.meta.data_quality).
  bool quiet = false;
  // Not a CLI option: continuous recording (`fxprof agent`). Every window_s seconds of the read pass,
  // on_window gets that window's samples as a Recording of their own (only the frames, stacks and binaries
  // they use; kernel frames named from a kallsyms table read once; the processes with samples, with their
  // libs; meta's start and end the window's) and the recording forgets them: the events, ring buffers,
  // processes, threads, libraries and unwind tables still alive stay, processes that ended drop theirs.
  // on_window returning false ends the recording; record()'s Recording is then the last window's part.
  // Called on the recording thread: the next window records after it returns.
  double window_s = 0;
  std::function<bool(Recording&)> on_window;
};

struct Stats {
  uint64_t samples = 0;
  uint64_t lost_records = 0;
  uint32_t threads = 0;
  uint32_t processes = 0;
  double duration_s = 0;
  // Added by the recorder work:
  uint64_t throttles = 0;       // PERF_RECORD_THROTTLE: the kernel lowered the rate (sampling cost too high)
  bool kernel_frames = true;    // false when perf_event_paranoid allowed user-space sampling only
  bool hardware_event = false;  // cycles (PMU) rather than the cpu-clock software event
  uint64_t event_period = 0;    // -e: one sample per this many events (0: the clock at frequency_hz)
  double frequency_hz = 0;      // the rate actually used (lowered to perf_event_max_sample_rate if needed)
  double finish_ms = 0;         // from the program's exit (or the end) to the profile being built
  double reader_cpu_ms = 0;     // CPU time of the thread that called record() (reading, unwinding, building)
  double program_cpu_ms = -1;   // launch mode: the program's CPU time (user + system, with the children it
                                // waited for), from wait4; -1 when unknown (attach mode, --duration)
  // Off-CPU (Options::off_cpu): what was captured.
  bool off_cpu_stacks = false;   // context-switch samples were allowed: blocked time has stacks
  uint64_t switch_samples = 0;   // context-switches samples read (one per switch-out)
  uint64_t off_cpu_spans = 0;    // switch-out .. switch-in spans measured
  uint64_t off_cpu_samples = 0;  // samples made of blocked time (also counted in `samples`)
  // The data-quality line about processes the kernel stopped profiling at an exec (setuid or unreadable
  // binary, recorder/quality.h), "" when none: a recording without samples says it instead of blaming CPU
  // use.
  std::string not_followed;
  // -a: CPU samples of the idle task (no thread: the CPUs had nothing to run).
  uint64_t idle_samples = 0;
  // Options::heap: the lines said under the heap's figures (event chunks lost, streams cut), "" when whole.
  std::string heap_incomplete;
};

using perf::ChildReaper;  // --duration: the launched program, reaped when it exits (perf/launcher.h)

struct Recording {
  model::Profile profile;
  // Descriptors of the mapped binaries (one per file): those deleted or replaced while they ran are read
  // through them (model::Lib::read_path): keep them open while the profile is symbolicated or served.
  std::vector<UniqueFd> open_files;
  int exit_status = 0;  // launch mode: the program's exit status (128+signal if killed); attach mode: 0
  // --duration: the launched program, still running, reaped when it exits (keep it while serving).
  std::unique_ptr<ChildReaper> reaper;
  Stats stats;
  bool hangup =
      false;  // SIGHUP arrived (closed terminal): handled like SIGTERM, and nobody is there to serve
  // The last of SIGINT/SIGTERM/SIGHUP that arrived while recording (0: none), those that came while the
  // recording ended included: `fxprof agent` records window after window and stops at one.
  int signal = 0;
};

// A running process: pid and name (comm).
struct ProcessInfo {
  int pid = 0;
  std::string name;
};
// The descendants of `pid` running now (children first, then theirs), from /proc/*/stat; at most `limit`.
// For `-p` recordings that got no samples: the work may be done by children that were already running
// (attaching follows only what the given processes start later).
std::vector<ProcessInfo> descendants(int pid, size_t limit = 16);

// The message for a recording without any sample (one paragraph, without "fxprof: "): why it may be, and
// for attached processes which running descendants could be added with -p.
std::string no_samples_message(const Options& options, const Stats& stats);

// Records until the launched program exits, the duration elapses, or SIGINT/SIGTERM/SIGHUP (attach mode).
// Notices (no PMU, paranoid level, clamped rate) go to stderr. An exec failure is an Error with exit_code 127
// and the message "cannot run 'NAME': <strerror>".
Result<Recording> record(const Options& options);

}  // namespace fxprof::recorder
