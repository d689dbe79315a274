// fxprof recorder internals: a tracker is one concern of the profile builder (builder.h), fed the typed
// records (records.h) in time order.
//
// A new concern: a Tracker subclass in a file of its own that writes what it learns into the profile (in its
// hooks or at finish()), and one line in make_trackers() (trackers.cpp), the one list of trackers, in the
// order each record reaches them: the task tracker first (tasks.h: it registers the record's process and
// thread, and serves the context's views of them), then the libraries (libraries.h: the mappings, which
// the others and the unwinder see as the record left them), then the others. Nothing else changes: the
// builder calls every hook of every tracker in that order, then adds its own part (CPU samples and CPU
// time). It is tested like the others, with synthetic records through the RecordSource boundary
// (tests/recorder/*_test.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/profile.h"
#include "recorder/host.h"
#include "recorder/records.h"
#include "recorder/waker.h"

namespace fxprof::recorder {

class Unwinder;
struct MapsEntry;

// Off-CPU time (recorder/offcpu_spans.h). `spans`: the switch records' blocked spans become markers (the
// unprivileged case: no stacks); `stacks`: the context-switches event's samples give each span its stack, and
// blocked time becomes samples at the sampling interval (accumulated per thread: at most one per interval of
// blocked time) with threadCPUDelta 0, the Idle category and a `[blocked: reason]` leaf.
struct OffCpuConfig {
  bool spans = false;
  bool stacks = false;
  uint64_t interval_ns = 1000000;   // one off-CPU sample per this much blocked time
  uint64_t threshold_ns = 1000000;  // a marker per blocked span at least this long
};

// Facts trackers give the rest of the builder (and the recording's summary).
struct RecordCounts {
  uint64_t lost = 0;                   // records the kernel dropped so far
  uint64_t throttled = 0;              // throttle records
  uint64_t wakes = 0;                  // wakeups the waker tracer reported
  uint64_t waker_stacks = 0;           // of those, with the waker's stack unwound
  uint64_t switch_samples = 0;         // context-switches samples read
  uint64_t switch_stacks_unwound = 0;  // of those, the ones a span needed
  uint64_t off_cpu_spans = 0;          // blocked or preempted spans seen
  uint64_t off_cpu_samples = 0;        // samples made of blocked time
  uint64_t jit_functions = 0;          // named JIT ranges read (all processes)
};

// What a tracker may use of the recording: read-only views of the processes and threads (the task tracker
// sets them, tasks.h) and the builder's unwind-this-sample service. A tracker that offers a fact to the
// others sets its function (thread_of..., out_since).
struct TrackerContext {
  model::Profile& profile;
  Procfs& procfs;
  // The task tracker's (tasks.h): the profile's thread `tid` is now (null when none is known).
  std::function<model::Thread*(uint32_t tid)> thread_of;
  // Calls `f` with each thread known now (alive), in the task tracker's own order.
  std::function<void(const std::function<void(uint32_t tid)>& f)> for_each_thread;
  // The profile's process entry of `pid` now (an exec may have given the pid a new one; null when none),
  // and each pid with an entry, in the task tracker's own order (ended processes too).
  std::function<model::Process*(uint32_t pid)> process_of;
  std::function<void(const std::function<void(uint32_t pid)>& f)> for_each_process;
  // The unwind-this-sample service: the stack of a sample as the builder gives a CPU sample's (DWARF or
  // frame-pointer user part, kernel part, "(stack truncated)" when the copy cut it short), interned; none
  // when the record is malformed. Only while the record's bytes are readable (the round, release()).
  std::function<std::optional<model::StackId>(const SampleRecord&)> unwind_sample;
  // Off-CPU (the spans tracker's, offcpu_spans.h): when thread `tid`'s open off-CPU span began (it is
  // switched out now), none if it runs.
  std::function<std::optional<uint64_t>(uint32_t tid)> out_since;
  Unwinder* unwinder = nullptr;  // null in frame-pointer mode
  bool off_cpu = false;          // off-CPU spans are recorded (their marker schemas and names are interned)
  RecordCounts counts;
  // Files not used because another user owns them or others may write them (the JIT code's perf maps and
  // jitdumps, recorder/jit.h jit_file_untrusted): "PATH: why" each, for the data-quality lines.
  std::vector<std::string> refused_files;
  // Perf maps whose names were not all kept (too many, or past kMaxJitFileBytes): "PATH: what" each.
  std::vector<std::string> jit_dropped;
};

// Whether any thread of the process has a sample (an exec keeps such an entry; JIT files are read for it).
bool has_samples(const model::Process& p);

// Why release() is called.
enum class Release : uint8_t {
  Round,  // pid 0: the round's records are about to be released (ring buffer space given back)
  Exec,   // `pid` execs at `before_ns`: the unwinder forgets its old program's mappings next
  Exit,   // `pid`'s last thread exited at `before_ns`: the unwinder forgets the pid next
  End,    // pid 0: finish(), every wait is closed
};

class Tracker {
 public:
  virtual ~Tracker() = default;
  // The recording's off-CPU options, before any record (the builder's set_off_cpu).
  virtual void set_off_cpu(const OffCpuConfig&) {}
  // Attach mode: thread `tid` of `pid` was running when fxprof attached (the task tracker registered it).
  virtual void on_attached(uint32_t /*pid*/, uint32_t /*tid*/, uint64_t /*time_ns*/) {}
  // The entry for thread `tid` ended (exit, another thread's exec) or was replaced by a new thread's (a
  // reused tid, a FORK): what a tracker keeps per thread ends with it. (The task tracker tells them all.)
  virtual void forget_thread(uint32_t /*tid*/) {}
  // The pid got a new process entry (a new process, or an exec after samples): what a tracker keeps per
  // process ends with the old one.
  virtual void forget_process(uint32_t /*pid*/) {}
  // Attach mode: an executable mapping of /proc/PID/maps, after the libraries tracker added it (as MMAP2
  // records would have described it to on_mmap2).
  virtual void on_attached_mapping(uint32_t /*pid*/, const MapsEntry&, uint64_t /*time_ns*/) {}
  virtual void on_sample(const SampleRecord&) {}
  virtual void on_mmap2(const Mmap2Record&) {}
  virtual void on_comm(const CommRecord&) {}
  virtual void on_fork(const ForkRecord&) {}
  virtual void on_exit(const ExitRecord&) {}
  virtual void on_switch(const SwitchRecord&) {}
  virtual void on_lost(const LostRecord&) {}
  virtual void on_throttle(const ThrottleRecord&) {}
  // The eBPF waker tracer's wakeups (waker.h), given before the round of records they happened in.
  virtual void on_wakings(std::span<Waking>) {}
  // A wakeup whose waker's stack the source had with it (a perf.data file's sched_waking sample: its
  // callchain or copied stack, interned; kNoStack when none), in the records' order. By default, as
  // on_wakings().
  virtual void on_waking(Waking& w, model::StackId /*waker_stack*/) { on_wakings(std::span<Waking>(&w, 1)); }
  // The stacks of `pid` taken before `before_ns` must be unwound now (`why`: its exec or its last thread's
  // exit is next, and the unwinder forgets its mappings); pid 0: the round's records are about to be
  // released, or the recording ends.
  virtual void release(uint32_t /*pid*/, uint64_t /*before_ns*/, Release /*why*/) {}
  // The last thread of `pid` exited and every tracker released its stacks (release(Exit)): the unwinder may
  // forget its mappings now (the libraries tracker's).
  virtual void process_ended(uint32_t /*pid*/) {}
  // Every reading round, with the clock's time (CLOCK_MONOTONIC, the records' clock): files the recorded
  // programs write (perf maps) are followed. A replay has no rounds' clock: it does not call it.
  virtual void tick(uint64_t /*now_ns*/) {}
  // The recording stopped at `end_ns`: waits still open end there. finish() follows.
  virtual void on_end(uint64_t /*end_ns*/) {}
  // Every record was handled and kernel frames are named (before the interrupted-instruction pass).
  virtual void kernel_named() {}
  // Every record of the recording was handled; kernel frames and off-CPU reasons are named, interrupted
  // instructions marked; the JIT tracker, last, reads the JIT files still unread.
  virtual void finish() {}
  // Continuous recording (ProfileBuilder::forget_interned): the profile's strings, frames and stacks were
  // emptied at a window's cut; an id kept from before means nothing now (intern it again when needed).
  virtual void on_model_reset() {}
};

class TaskTracker;
class LibraryTracker;

// The trackers of a recording, in the order each record reaches them (trackers.cpp), made into `list`; the
// first two, which the builder asks more of (registering launched and attached tasks, CPU state, known
// code, kept files), are also returned typed.
struct FirstTrackers {
  TaskTracker& tasks;
  LibraryTracker& libs;
};
FirstTrackers make_trackers(TrackerContext& context, std::vector<std::unique_ptr<Tracker>>& list);

}  // namespace fxprof::recorder
