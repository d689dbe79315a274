// The two perf-record harnesses' input: byte 0 picks the layout, the rest is a stream of records, each
// copied to aligned storage before the callback sees it (the decoder reads records in place, as in the
// ring buffer, where they are 8-byte aligned). A header whose size is too small or runs past the input ends
// the stream.
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace fxprof::fuzz {

template <class F>
void for_each_record(const uint8_t* data, size_t size, F&& on_record) {
  std::vector<uint64_t> record;  // reused: a record's storage lives until the next one
  size_t at = 1;
  while (at + sizeof(perf_event_header) <= size) {
    perf_event_header h;
    std::memcpy(&h, data + at, sizeof h);
    if (h.size < sizeof h || h.size > size - at) break;
    record.assign((h.size + 7) / 8, 0);
    std::memcpy(record.data(), data + at, h.size);
    on_record(reinterpret_cast<const perf_event_header*>(record.data()), record);
    at += h.size;
  }
}

}  // namespace fxprof::fuzz
