// fxprof driver: the kinds of source the driver (driver.h) runs, one row each; each is a file of its own.
//
// A new source: a Source subclass in a file of its own that adds its records (in time order) and wakeups to
// each round (or, for events too many for the rounds, hands them over at the driver's finish), and its row
// here. Whoever records from it adds it to a Driver: the live Session its live rows (recorder/session.h, in
// this order: a wake is drained after the records it may end), `fxprof stat` its buffers, replay() and
// import their file's.
//
//   source        file                         gives                                   driven by
//   perf buffers  driver/source_buffers.cpp    every ring buffer's records, merged     the Session (record),
//                                              by time (RingSet below)                 run_stat() (stat)
//   eBPF waker    recorder/source_waker.cpp    the waker tracer's wakeups              the Session (off-CPU)
//   heap pipe     recorder/source_heap.cpp     the heap library's allocations, folded  the Session (--heap)
//                                              on threads of its own, and uprobes on
//                                              an allocator linked in: at finish()
//   capture       recorder/capture.cpp         a capture file's calls, as recorded     replay()
//   perf.data     recorder/perf_import.cpp     a perf.data file's records; its         import_perf_data()
//                                              scheduler tracepoints as switches
//                                              and wakeups
//
// `record` and `stat` read the same kind of buffers through the same source: record's hold samples and the
// side-band records of its two events (recorder/perf.h), stat's each exiting thread's counts
// (PERF_RECORD_READ) and the fork, comm and exit records that name their processes (counters/stat.h).
// The heap pipe is started by recorder::Options::heap before the program is launched (the library goes into
// the environment it inherits) and finished once the recorder built the processes, threads and libs its
// stacks go through, so its rows are in the model before the passes run and its data-quality lines are the
// recording's. The /proc samplers (RSS, counters: recorder/rss.h, recorder/proc_counters.h) write counter
// tracks into the model on the recording's clock, not records for the trackers: the Session ticks them, a
// capture replays their ticks.
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "driver/driver.h"
#include "perf/ring.h"

namespace fxprof::driver {

// Records in buffers, read in rounds: the ring buffers (RingSet), or the tests' synthetic ones.
class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Appends every record written since the last release(), from every buffer, in each buffer's order; of
  // each buffer only those up to its first record stamped after `until` (the round's watermark,
  // driver.h's Round::until; a record stamped 0 is never after it): that one and what follows stay for a
  // later round.
  virtual void collect(std::vector<RecordRef>& out, uint64_t until) = 0;
  // Gives the space of everything collect() handed out back to the writer (not what it held back).
  virtual void release() = 0;
};

// The ring buffers of one recording (one buffer: perf/ring.h), read in rounds: every buffer from its tail to
// the head the kernel published when the round reached it, up to the round's watermark. A record held back
// stays in its buffer (its space is not given back): nothing is copied. A record that wraps around a buffer's
// end is copied into that buffer's scratch space, so every record handed out is contiguous until release().
class RingSet final : public RecordSource {
 public:
  // A record's time, by the layout its events asked for (the recorder's: recorder/records.h's
  // record_time); stat's records carry none (0: each buffer's order is kept).
  using TimeOf = uint64_t (*)(const perf_event_header*);
  explicit RingSet(TimeOf time_of) : time_of_(time_of) {}

  // Adds a buffer; `switch_event`: the recorder's context-switches event writes into it.
  void add(perf::RingBuffer rb, bool switch_event);
  size_t size() const { return bufs_.size(); }
  const perf::RingBuffer& operator[](size_t b) const { return bufs_[b]; }

  void collect(std::vector<RecordRef>& out, uint64_t until) override;
  void release() override;

 private:
  TimeOf time_of_;
  std::vector<perf::RingBuffer> bufs_;
  std::vector<bool> switch_;
  std::vector<std::vector<std::byte>> scratch_;
  std::vector<uint64_t> heads_;  // where each buffer's last round ended
};

// The perf buffers as a source: each round, what every buffer holds up to the round's watermark, merged by
// time (at equal times a
// switch-out's sample before its switch record); given back at release().
std::unique_ptr<Source> buffer_source(RecordSource& buffers);

// One round of `source`'s records up to `until`, merged by time, fed to `sink` and released: the driver's
// round with buffer_source(source) as its one source. For tests of a sink with synthetic buffers. Returns
// the number of records handled.
size_t feed_round(RecordSource& source, RecordSink& sink, uint64_t until = kEverything);

}  // namespace fxprof::driver
