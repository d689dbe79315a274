// fxprof heap shim (heap/shim.cpp): each thread's call stacks, interned so that a repeated one is sent once,
// and a new one sent as what differs from the thread's previous definition (heap/wire.h, StackDef).
// Compiled into libfxprof_heap.so only; nothing here calls malloc (it lives in the thread's mmap'd state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "heap/wire.h"

namespace fxprof::heap::shim {

// A stack's identity: a 64-bit hash of its return addresses (leaf first). Among a thread's ~100k distinct
// stacks two share a hash with a chance of ~3e-10. Inline, over the unwinder's array as it is (a copy and a
// call cost 1% of cc1plus's run).
inline uint64_t stack_hash(void* const* frames, size_t count) {
  // Four independent multiply chains, folded at the end: one chain over ~45 frames waited on each multiply
  // in turn (half of the interning's time on python).
  constexpr uint64_t kMul = 0xFF51AFD7ED558CCDull;
  auto at = [&](size_t i) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(frames[i])); };
  uint64_t a = 1469598103934665603ull, b = 0x9E3779B97F4A7C15ull, c = 0xC2B2AE3D27D4EB4Full,
           d = 0x165667B19E3779F9ull;
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    a = (a ^ at(i)) * kMul;
    b = (b ^ at(i + 1)) * kMul;
    c = (c ^ at(i + 2)) * kMul;
    d = (d ^ at(i + 3)) * kMul;
  }
  for (; i < count; ++i) a = (a ^ at(i)) * kMul;
  uint64_t h = static_cast<uint64_t>(count);
  for (uint64_t l : {a, b, c, d}) h = (h ^ l ^ (l >> 29)) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 32);
}

class StackCache {
 public:
  struct Found {
    uint32_t id;
    bool fresh;  // a new id: its definition must be sent before its first use
  };
  // The thread's id of the stack with hash `h`. Ids count from 0 and are never reused: when the table is too
  // crowded it starts over and stacks seen before get new ids (the old definitions are simply superseded).
  // (A small table of the last stacks seen, looked at first, saved nothing on cc1plus: the slots of stacks
  // seen lately are in the CPU's cache anyway, and the misses are the stacks not seen lately.)
  Found find(uint64_t h);
  // How many outer frames `frames` (leaf first) shares with the stack this thread defined last, which
  // `frames` becomes: a definition carries only the rest (cc1plus: 26 of 45 frames shared on average, so
  // the stream is a third smaller).
  uint32_t share_outer(void* const* frames, uint32_t count);
  // A forked child's thread: ids start again from 0 (they are scoped to pid and tid), nothing defined yet.
  void reset();

 private:
  struct Slot {
    uint64_t hash;
    uint32_t id;
    uint32_t used;
  };
  static constexpr size_t kSlots = size_t{1} << 16;  // 1 MiB, touched as used
  uint32_t next_id_ = 0;
  uint32_t last_count_ = 0;
  void* last_[wire::kMaxFrames];  // the last definition's frames, leaf first
  Slot slots_[kSlots];
};

}  // namespace fxprof::heap::shim
