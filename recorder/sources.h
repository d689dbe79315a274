// fxprof recorder: the kinds of source the driver (driver.h) runs, one row each; each is a file of its own.
//
// A new source: a Source subclass in a file of its own that adds its records (in time order) and wakeups to
// each round, and its row here. Whoever records from it adds it to a Driver: the live Session the live rows
// (recorder/session.h, in this order: a wake is drained after the records it may end), replay() and import
// their file's.
//
//   source          file                 gives                                        driven by
//   perf buffers    source_buffers.cpp   every ring buffer's records, merged by time  the Session (record)
//   eBPF waker      source_waker.cpp     the waker tracer's wakeups (waker.h)         the Session (--off-cpu)
//   capture         capture.cpp          a capture file's calls, as recorded          replay()
//   perf.data       perf_import.cpp      a perf.data file's records; its scheduler    import_perf_data()
//                                        tracepoints as switches and wakeups
//
// The /proc samplers (RSS, counters: rss.h, proc_counters.h) write counter tracks into the model on the
// recording's clock, not records for the trackers: the Session ticks them, a capture replays their ticks.
// The heap's events (heap/) come from the program's own pipe after the recording and are added by `record`
// (cli/cmd_record.cpp) before the passes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "recorder/driver.h"

namespace fxprof::recorder {

class WakerTracer;

// The perf buffers (RingSet, or the tests' synthetic ones): each round, what every buffer holds, merged by
// time (at equal times a switch-out's sample before its switch record); given back at release().
std::unique_ptr<Source> buffer_source(RecordSource& buffers);

// The eBPF waker tracer: each round, it is told the processes `new_pids` returns (the builder's, since the
// last round), then its wakeups are drained into the round: after the buffers' records were collected, so
// that every wake before a switch-in of the round is known when its span ends (a wake comes before the
// switch-in it leads to, and the tracer commits it at once).
std::unique_ptr<Source> waker_source(WakerTracer& tracer, std::function<std::vector<uint32_t>()> new_pids);

}  // namespace fxprof::recorder
