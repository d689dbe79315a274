// fxprof recorder: the recorder's records, decoded once into typed records by the perf layer's decoder
// (perf/records.h, the one place that knows their byte layouts), driven by the attributes of its events.
//
// The kernel writes what make_attr (recorder/perf.h) asked for: samples of IP, TID, TIME, CPU, [PERIOD],
// CALLCHAIN and, in DWARF mode or on the context-switches event, REGS_USER [+ STACK_USER]; the other records
// with the sample_id_all trailer (pid/tid, time, cpu). Which of the two events wrote a record its buffer
// says (RecordRef::switch_event). A Record's spans and string views point into the record itself: they are
// valid as long as its bytes are (until the RecordSource's release(), recorder/host.h).
#pragma once

#include <linux/perf_event.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <variant>

#include "perf/records.h"
#include "recorder/perf.h"

namespace fxprof::recorder {

// The typed records are the perf layer's (perf/records.h), decoded by its one decoder.
using perf::CommRecord;
using perf::ExitRecord;
using perf::ForkRecord;
using perf::LostRecord;
using perf::Mmap2Record;
using perf::OtherRecord;
using perf::Record;
using perf::SampleRecord;
using perf::SwitchRecord;
using perf::TaskRecord;
using perf::ThrottleRecord;

// What decode() needs to know of the events that wrote the records.
struct RecordLayout {
  bool period = true;             // samples carry PERIOD (not with a fixed `-e` period)
  bool dwarf = false;             // samples carry REGS_USER and STACK_USER
  uint64_t regs_mask = 0;         // the CPU event's REGS_USER mask (the unwinder's registers)
  uint64_t switch_regs_mask = 0;  // the context-switches event's (regs_mask plus RDI)

  static RecordLayout of(const EventConfig& events);
  // The attributes of the recorder's two events (make_attr, make_switch_attr: event 0 and 1), which the
  // perf layer's decoder reads records by.
  perf::Layout attrs() const;
};

// One record; `switch_event`: it came from a context-switches event's buffer (event 1 of `attrs`).
Record decode(const perf_event_header* h, const perf::Layout& attrs, bool switch_event = false);
Record decode(const perf_event_header* h, const RecordLayout& layout, bool switch_event = false);
// A record's time (a sample's own, or the sample_id_all trailer's), for merging buffers: 0 when too short.
uint64_t record_time(const perf_event_header* h);

}  // namespace fxprof::recorder
