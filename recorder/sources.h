// fxprof recorder: the recorder's own live sources, the eBPF waker tracer and the heap pipe. Every kind of
// source the driver runs (record's and stat's perf buffers, the waker, the heap pipe, a capture, a
// perf.data) is a row of driver/sources.h, one file each; this is the header of those only the Session
// drives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "driver/sources.h"
#include "heap/heap.h"
#include "model/profile.h"
#include "recorder/quality.h"

namespace fxprof::recorder {

using driver::buffer_source;
using driver::Driver;
using driver::RecordSink;
using driver::Round;
using driver::Source;

class WakerTracer;

// The eBPF waker tracer: each round, it is told the processes `new_pids` returns (the builder's, since the
// last round), then its wakeups are drained into the round: after the buffers' records were collected, so
// that every wake before a switch-in of the round is known when its span ends (a wake comes before the
// switch-in it leads to, and the tracer commits it at once). Those after the round's watermark (as the
// buffers' records, driver/driver.h's Round::until) are kept for a later round.
std::unique_ptr<Source> waker_source(WakerTracer& tracer, std::function<std::vector<uint32_t>()> new_pids);

// What the heap pipe could not see, known at its finish: said with the recording's data quality.
struct HeapOutcome {
  std::vector<QualityProblem> problems;  // an allocator the library cannot see; streams cut short
  std::string uprobes_line;  // what uprobes on the program's own allocator recorded ("" when not used)
  std::string incomplete;    // said under the heap's figures: chunks lost, streams cut ("" when whole)
};

// The heap pipe (`record --heap`, heap/heap.h): the heap library's stream from the launched program
// `program` (its argv[0]), copied and folded on threads of its own while it runs, never through the rounds
// (python's --heap=full is 5 M events); and, as root, uprobes on an allocator linked into the executable
// (recorder/heap_uprobes.h). Started before the program is forked: the library goes into the environment it
// inherits (taken out again at finish, or when the source is dropped). At the driver's finish, once the
// builder made the processes, threads and libs, its rows and counters go into `profile` and what it could
// not see into `out`. Err: the heap library's reader could not start.
Result<std::unique_ptr<Source>> heap_source(const heap::Options& options, const std::string& program,
                                            model::Profile& profile, HeapOutcome& out);

}  // namespace fxprof::recorder
