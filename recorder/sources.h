// fxprof recorder: the recorder's own live source, the eBPF waker tracer. Every kind of source the driver
// runs (record's and stat's perf buffers, the waker, a capture, a perf.data) is a row of driver/sources.h,
// one file each; this is the header of the one that only the Session drives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "driver/sources.h"

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

}  // namespace fxprof::recorder
