// The recorder's records through the perf layer's one decoder (perf/records.h): its layout is the attributes
// of its two events, as make_attr and make_switch_attr ask the kernel for them.
#include "recorder/records.h"

namespace fxprof::recorder {

RecordLayout RecordLayout::of(const EventConfig& events) {
  RecordLayout l;
  l.period = (events.sample_type() & PERF_SAMPLE_PERIOD) != 0;
  l.dwarf = events.dwarf;
  l.regs_mask = events.regs_mask;
  l.switch_regs_mask = events.switch_regs_mask;
  return l;
}

perf::Layout RecordLayout::attrs() const {
  EventConfig c;
  c.dwarf = dwarf;
  c.regs_mask = regs_mask;
  c.switch_regs_mask = switch_regs_mask;
  c.event_period = period ? 0 : 1;
  perf::Layout l({perf::EventAttr::of(make_attr(c)), perf::EventAttr::of(make_switch_attr(c))});
  l.unwind_regs = regs_mask;
  return l;
}

Record decode(const perf_event_header* h, const perf::Layout& attrs, bool switch_event) {
  Record r = perf::decode(h, attrs, switch_event ? 1 : 0);
  if (auto* s = std::get_if<SampleRecord>(&r)) s->switch_event = switch_event;
  return r;
}

Record decode(const perf_event_header* h, const RecordLayout& layout, bool switch_event) {
  return decode(h, layout.attrs(), switch_event);
}

uint64_t record_time(const perf_event_header* h) {
  auto* p = reinterpret_cast<const std::byte*>(h);
  uint64_t t = 0;
  if (h->size < 32) return 0;
  if (h->type == PERF_RECORD_SAMPLE)
    std::memcpy(&t, p + 24, 8);  // header, ip, pid/tid, time
  else
    std::memcpy(&t, p + h->size - 16, 8);
  return t;
}

}  // namespace fxprof::recorder
