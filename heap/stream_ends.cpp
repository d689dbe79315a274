#include "heap/stream_ends.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/byte_reader.h"

namespace fxprof::heap {

namespace internal {

namespace {

wire::Kind kind_at(std::span<const std::byte> records, size_t at) {
  return static_cast<wire::Kind>(records[at]);
}

// A thread's first chunk: no records, or only its Clock record (heap/wire.h).
bool hello(const wire::ChunkHeader& h, std::span<const std::byte> records) {
  return records.empty() || (h.bytes == sizeof(wire::Record) && kind_at(records, 0) == wire::Kind::Clock);
}

}  // namespace

void StreamEnds::chunk(size_t off, const wire::ChunkHeader& h, std::span<const std::byte> records) {
  End& e = ends_[h.pid];
  if (h.bytes == sizeof(wire::Record) && kind_at(records, 0) == wire::Kind::Bye) {
    e.bye = true;
    return;
  }
  // A process's main thread saying hello is a new process (a fork child, an exec, a reused pid): its own Bye
  // is due. Other threads' chunks after the Bye are the exit's stragglers.
  if (h.tid == h.pid && hello(h, records)) e.bye = false;
  e.last = off;
}

std::vector<StreamCut> StreamEnds::cuts(const std::byte* base) const {
  std::vector<StreamCut> out;
  for (const auto& [pid, e] : ends_) {
    if (e.bye) continue;
    wire::ChunkHeader h;
    std::memcpy(&h, base + e.last, sizeof h);
    const std::span<const std::byte> records(base + e.last + sizeof h, h.bytes);
    uint64_t clock = 0, event = 0;
    for (size_t at = 0; at < records.size();) {
      const wire::Kind k = kind_at(records, at);
      if (k == wire::Kind::Alloc || k == wire::Kind::Free) {
        const size_t time_at = at + 1 + (k == wire::Kind::Alloc ? 4 : 0);
        if (time_at + 8 > records.size()) break;
        std::memcpy(&event, records.data() + time_at, 8);
        at += k == wire::Kind::Alloc ? sizeof(wire::AllocRecord) : sizeof(wire::FreeRecord);
        continue;
      }
      wire::Record r;
      if (!read_at(records, at, r)) break;
      if (k == wire::Kind::Clock) clock = r.time;
      at += sizeof r + (k == wire::Kind::StackDef ? std::min<uint64_t>(r.addr, wire::kMaxFrames) * 8 : 0);
    }
    out.push_back({pid, clock ? clock : event});
  }
  std::sort(out.begin(), out.end(), [](const StreamCut& a, const StreamCut& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace internal

std::string stream_cut_line(const std::string& program, const StreamCut& cut, uint64_t start_ns) {
  char when[64];
  if (cut.time_ns >= start_ns && start_ns != 0)
    std::snprintf(when, sizeof when, "%.3f s", static_cast<double>(cut.time_ns - start_ns) / 1e9);
  else
    std::snprintf(when, sizeof when, "its start");
  return "heap: the allocation stream of " + program + " (pid " + std::to_string(cut.pid) + ") was cut at " +
         when +
         ": it closed or replaced fxprof's heap descriptor (or was killed, or outlived the recording), so "
         "its "
         "allocations and frees after that are not in the heap figures";
}

}  // namespace fxprof::heap
