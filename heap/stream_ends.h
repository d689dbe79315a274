// fxprof heap recorder: which processes' streams ended without their Bye (heap/wire.h), found by the reader
// as it takes chunks in (one lookup per 4 KiB chunk), and when: heap/heap.h's StreamCut.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "heap/heap.h"
#include "heap/wire.h"

namespace fxprof::heap::internal {

class StreamEnds {
 public:
  // A whole chunk read at `off` in the stream: its header and records.
  void chunk(size_t off, const wire::ChunkHeader& h, std::span<const std::byte> records);
  // The processes whose last chunk was not a Bye, with the time of that chunk (its last Clock record's, or
  // its last event's in a stream of CLOCK_MONOTONIC times), from the stream `base` the offsets are in.
  std::vector<StreamCut> cuts(const std::byte* base) const;

 private:
  struct End {
    size_t last = 0;  // offset of the process's last chunk
    bool bye = false;
  };
  std::unordered_map<uint32_t, End> ends_;  // by pid
};

}  // namespace fxprof::heap::internal
