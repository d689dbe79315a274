// fxprof heap recorder internals (heap/source.cpp): the live blocks while matching frees, and the encoding of
// calls recorded outside the shim (heap/external.cpp) into the shim's stream format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "heap/heap.h"

namespace fxprof::heap {

// Live blocks: (pid, address) -> the allocation's event index. Open addressing with linear probing, deletion
// by backward shift (no tombstones), doubled at half full: std::unordered_map's node per block was a malloc,
// a free and a cache miss per event, a third of finish() with 5M allocations.
class LiveBlocks {
 public:
  static constexpr size_t kNone = SIZE_MAX;
  LiveBlocks() : slots_(size_t{1} << 16) {}
  // The slot of (pid, addr), or kNone.
  size_t find(uint32_t pid, uint64_t addr) const {
    for (size_t i = home(pid, addr);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.event == kEmpty) return kNone;
      if (s.addr == addr && s.pid == pid) return i;
    }
  }
  // The slot of (pid, addr), created holding `event` when new (second: whether it was).
  std::pair<size_t, bool> insert(uint32_t pid, uint64_t addr, uint32_t event) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = home(pid, addr);; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (s.event == kEmpty) {
        s = {addr, pid, event};
        ++used_;
        return {i, true};
      }
      if (s.addr == addr && s.pid == pid) return {i, false};
    }
  }
  uint32_t& event(size_t slot) { return slots_[slot].event; }
  void erase(size_t i) {
    for (size_t j = (i + 1) & mask(); slots_[j].event != kEmpty; j = (j + 1) & mask()) {
      const size_t h = home(slots_[j].pid, slots_[j].addr);
      if (((j - h) & mask()) >= ((j - i) & mask())) {  // i lies on j's probe path: j moves back to i
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].event = kEmpty;
    --used_;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t addr = 0;
    uint32_t pid = 0;
    uint32_t event = kEmpty;
  };
  size_t mask() const { return slots_.size() - 1; }
  size_t home(uint32_t pid, uint64_t addr) const {
    const uint64_t h = (addr ^ (uint64_t{pid} << 47)) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h >> 20) & mask();
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const Slot& s : old)
      if (s.event != kEmpty) insert(s.pid, s.addr, s.event);
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// `calls` as chunks of the shim's stream (heap/wire.h), so that they become the same events: every call in
// full mode; in sampled mode the same Poisson sampling by bytes as the shim (a countdown per thread, mean
// `rate` bytes), frees of sampled blocks only, a free marked temporary when its thread allocated nothing
// since.
std::vector<std::byte> external_chunks(std::span<const ExternalCall> calls, Mode mode, double rate);

}  // namespace fxprof::heap
