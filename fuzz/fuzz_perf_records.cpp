// Perf record decoding: a mutated stream of records (samples with DWARF stacks, MMAP2, COMM, FORK, EXIT,
// SWITCH, LOST) through the profile builder and the unwinder, as the recorder feeds them from the ring
// buffers. The kernel writes these, but a bug in our decoding of sizes must not read past a record.
#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/record_stream.h"
#include "model/profile.h"
#include "recorder/builder.h"
#include "recorder/unwind/unwinder.h"

using namespace fxprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  recorder::EventConfig events;
  events.dwarf = (data[0] & 1) != 0;
  events.exclude_kernel = (data[0] & 2) != 0;
  events.stack_size = 512;
  events.regs_mask = recorder::user_regs_mask();
  model::Profile profile;
  recorder::Unwinder unwinder;
  recorder::ProfileBuilder builder(profile, events.dwarf ? &unwinder : nullptr, events,
                                   recorder::live_procfs());
  builder.on_launched(100, "fuzz", 0);
  // Records are copied to aligned storage one at a time: the builder reads them in place, as in the ring.
  fuzz::for_each_record(data, size, [&](const perf_event_header* h, const std::vector<uint64_t>&) {
    builder.handle(h);
    builder.resolve_pending();  // the record's storage is reused for the next one
  });
  builder.on_end(0);
  return 0;
}
