// fxprof driver: the one way a recording is read: sources -> driver -> a sink. `record`, replay, import and
// `fxprof stat` all go through it.
//
// A source (Source below; the kinds are listed in driver/sources.h, one file and one row each) produces the
// recording's input in rounds, in time order: perf records (raw, in place, or typed when they have no perf
// bytes of their own) and wakeups (Waking). A file source (a capture, a perf.data) also makes the sink's
// other calls (launched, attached, end) where they came. A source whose events are too many for the rounds
// (the heap pipe) folds them on threads of its own and hands them over at the driver's finish(). The driver
// asks every source for its part of a round, in the order they were added, merges their records by time
// (stable: at one time, the earlier source's first), gives the sink the round's wakeups, then its records,
// then lets each source give back the space.
//
// The sinks (RecordSink below): the recorder's ProfileBuilder, whose trackers make the profile's model
// (recorder/builder.h), or a capture's tap before it (recorder/capture.h); and `fxprof stat`'s counting
// sink, which sums each exiting thread's counts per process (counters/count_sink.h). Who drives: the live
// Session (recorder/session.h: a round every 25 ms), replay() (recorder/capture.h), import
// (recorder/perf_import.h) and stat (counters/stat.cpp: a round each time it polls). pprof import is no
// record stream (a pprof holds aggregated stacks, not events): it builds the model directly
// (recorder/pprof_import.h).
//
// This folder is below recorder/ and counters/ and above perf/ (the records' layouts, the ring buffers): it
// knows records and wakeups as events in time, nothing of profiles or counts.
// Cost: one virtual call per source per round, and the merge (a no-op with one source of records).
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "perf/records.h"

namespace fxprof::driver {

// A thread woken (the recorder's eBPF waker tracer, recorder/waker.h; a perf.data file's sched_waking): the
// wake's time splits a wait, blocked before it and runnable after.
struct Waking {
  uint64_t time = 0;  // CLOCK_MONOTONIC ns
  uint32_t waker_pid = 0, waker_tid = 0, wakee_pid = 0, wakee_tid = 0;
  uint32_t flags = 0;  // recorder/waker.h's kWake*: 0 for a traced task's own wake
  // A wake from a futex system call: the futex word (the waker's RDI), its user registers and a copy of its
  // user stack from regs.sp (empty: no stack, and uaddr 0 for a wake that was not a futex's).
  uint64_t uaddr = 0;
  perf::UserRegs regs;
  std::vector<std::byte> stack;
};

// One record of a round: where it is (readable until its source's release()) and its time. A file
// source's record may have no perf bytes of its own (`typed`: perf.data's scheduler tracepoints as switch
// records) or be a wakeup in the records' order (`waking`: perf.data's sched_waking samples, with `h` the
// sample, whose stack is the waker's): handled in place of `h` alone.
struct RecordRef {
  uint64_t time;
  const perf_event_header* h;
  bool switch_event;  // from a context-switches event's buffer (the recorder's ProfileBuilder::handle)
  const perf::Record* typed = nullptr;
  Waking* waking = nullptr;
};

// What a recording feeds its sink, in the order it happens: the processes it starts with, the wakeups, each
// round's records (merged by time, readable until the call returns), and the end. The driver makes the
// rounds' calls from its sources; a file source makes the others where its file has them.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Launch mode: the pid fxprof forked; its first exec keeps this entry and `name`.
  virtual void on_launched(uint32_t pid, const std::string& name, uint64_t time_ns) = 0;
  // Attach mode: a process (its name, threads and executable mappings from /proc), and a thread found when
  // its /proc/PID/task is scanned again.
  virtual void on_attached(uint32_t pid, uint64_t time_ns) = 0;
  virtual void on_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) = 0;
  // Wakeups, given before the round of records they happened in; their stacks may be moved out.
  virtual void on_wakings(std::span<Waking> w) = 0;
  virtual void on_records(std::span<const RecordRef> round) = 0;
  // The recording stopped at `end_ns` (waits still open end there): the sink completes what it makes.
  virtual void on_end(uint64_t end_ns) = 0;
};

// A round that takes everything its sources hold (Round::until): a recording's end, a window's cut, stat,
// a file.
inline constexpr uint64_t kEverything = UINT64_MAX;

// One round of input, as the sources add to it.
struct Round {
  // The round's watermark: a live source hands out only what happened at or before it and keeps the rest
  // for a later round (driver/sources.h). Each per-CPU buffer is read in turn, so a record written into
  // the first one after it was read can be older than what the second one gives in the same round: a
  // thread's fork read a round after its rename (perf's answer: ordered events, flushed up to the previous
  // round's end). Records stamped 0 (stat's) are never held.
  uint64_t until = kEverything;
  std::vector<Waking> wakings;     // given to the sink before the records
  std::vector<RecordRef> records;  // each source's part in time order; merged by the driver
  // The sink hears of the round even when it has no records (a live reading round: the builder releases
  // what it kept at each round's end); a file source's round has records.
  bool fed = false;
};

class Source {
 public:
  virtual ~Source() = default;
  // Adds the source's part of the next round to `round` (its records after the others', in time order). A
  // file source first makes on `sink` the calls that came before that round. False when it has nothing
  // more, ever (a file's end); a live source gives rounds until the recording stops asking.
  virtual bool next(Round& round, RecordSink& sink) = 0;
  // The round was fed to the sink: the space of the records it added may be given back.
  virtual void release() {}
  // The recording ended and its sink completed its work (Driver::finish): a source whose events never go
  // through the rounds (the heap pipe: millions of allocations, folded on threads of its own) hands them
  // over now. The others have nothing left.
  virtual void finish() {}
};

class Driver {
 public:
  explicit Driver(RecordSink& sink) : sink_(sink) {}
  // Sources are asked in the order they are added (driver/sources.h lists the kinds); not owned.
  void add(Source& source) {
    sources_.push_back(&source);
    ended_.push_back(false);
  }
  // One round from every source still giving, up to the watermark `until` (Round::until): merged, fed,
  // released. The number of records fed.
  size_t round(uint64_t until = kEverything);
  // Rounds until every source has ended (file sources).
  void run();
  // The recording stopped at `end_ns` (waits still open end there): the sink completes its work. (A
  // capture's source makes this call itself, where the file has it.)
  void end(uint64_t end_ns) { sink_.on_end(end_ns); }
  // After end() and what the recorder completes with it (its /proc counter tracks): every source's
  // finish(), in the order they were added.
  void finish() {
    for (Source* s : sources_) s->finish();
  }

 private:
  RecordSink& sink_;
  std::vector<Source*> sources_;
  std::vector<bool> ended_;
  Round round_;
  std::vector<size_t> cuts_;  // where each source's records begin in round_.records
};

}  // namespace fxprof::driver
