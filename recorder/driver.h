// fxprof recorder: the driver, the one way a recording is made: sources -> profile builder (its trackers,
// tracker.h) -> model.
//
// A source (Source below; the kinds are listed in sources.h, one file each) produces the recording's input in
// rounds, in time order: perf records (raw, in place, or typed when they have no perf bytes of their own) and
// the eBPF waker tracer's wakeups. A file source (a capture, a perf.data) also makes the sink's other calls
// (launched, attached, end) where they came. The driver asks every source for its part of a round, in the
// order they were added, merges their records by time (stable: at one time, the earlier source's first),
// gives the sink the round's wakeups, then its records, then lets each source give back the space.
//
// Who drives: the live Session (recorder/session.h: the ring buffers and the waker tracer, a round every
// 25 ms), replay() (recorder/capture.h: a capture file) and import (recorder/perf_import.h: a perf.data
// file). The sink is the ProfileBuilder (builder.h), or a capture's tap before it (capture.h): all three make
// their profile through the same calls. pprof import is no record stream (a pprof holds aggregated stacks,
// not events): it builds the model directly (pprof_import.h). `fxprof stat` counts, it makes no profile: see
// counters/stat.h for why it does not come through here.
//
// Cost: one virtual call per source per round, and the merge (a no-op with one source of records).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "recorder/host.h"
#include "recorder/waker.h"

namespace fxprof::recorder {

// One round of input, as the sources add to it.
struct Round {
  std::vector<Waking> wakings;     // the waker tracer's: given to the sink before the records (host.h)
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
};

class Driver {
 public:
  explicit Driver(RecordSink& sink) : sink_(sink) {}
  // Sources are asked in the order they are added (recorder/sources.h lists the kinds); not owned.
  void add(Source& source) {
    sources_.push_back(&source);
    ended_.push_back(false);
  }
  // One round from every source still giving: merged, fed, released. The number of records fed.
  size_t round();
  // Rounds until every source has ended (file sources).
  void run();
  // The recording stopped at `end_ns` (waits still open end there): the sink completes the profile. (A
  // capture's source makes this call itself, where the file has it.)
  void end(uint64_t end_ns) { sink_.on_end(end_ns); }

 private:
  RecordSink& sink_;
  std::vector<Source*> sources_;
  std::vector<bool> ended_;
  Round round_;
  std::vector<size_t> cuts_;  // where each source's records begin in round_.records
};

}  // namespace fxprof::recorder
