// fxprof heap shim (heap/shim.cpp): each thread's call stacks, interned so that a repeated one is sent once,
// and a new one sent as what differs from the thread's previous definition (heap/wire.h, StackDef).
// Compiled into libfxprof_heap.so only; nothing here calls malloc (it lives in the thread's mmap'd state).
#pragma once

#include <cstddef>
#include <cstdint>

#include "heap/wire.h"

namespace fxprof::heap::shim {

// A stack's identity: a 64-bit hash of its return addresses (leaf first). Among a thread's ~100k distinct
// stacks two share a hash with a chance of ~3e-10.
uint64_t stack_hash(const uint64_t* frames, size_t count);

class StackCache {
 public:
  struct Found {
    uint32_t id;
    bool fresh;  // a new id: its definition must be sent before its first use
  };
  // The thread's id of the stack with hash `h`. Ids count from 0 and are never reused: when the table is too
  // crowded it starts over and stacks seen before get new ids (the old definitions are simply superseded).
  Found find(uint64_t h);
  // How many outer frames `frames` (leaf first) shares with the stack this thread defined last, which
  // `frames` becomes: a definition carries only the rest (cc1plus: 26 of 45 frames shared on average, so
  // the stream is a third smaller).
  uint32_t share_outer(const uint64_t* frames, uint32_t count);
  // A forked child's thread: ids start again from 0 (they are scoped to pid and tid), nothing defined yet.
  void reset();

 private:
  struct Slot {
    uint64_t hash;
    uint32_t id;
    uint32_t used;
  };
  static constexpr size_t kSlots = size_t{1} << 16;  // 1 MiB, touched as used
  // The stacks seen last, direct-mapped, looked at first: the slots are a cache miss per allocation (80 ns
  // on cc1plus, more than libunwind's own top function), and 81% of cc1plus's allocations have a stack seen
  // among the last thousand (74% among 256, 84% among 4096).
  static constexpr size_t kRecent = 1024;  // 16 KiB
  uint32_t next_id_ = 0;
  uint32_t last_count_ = 0;
  uint64_t last_[wire::kMaxFrames];  // the last definition's frames, leaf first
  Slot recent_[kRecent];
  Slot slots_[kSlots];
};

}  // namespace fxprof::heap::shim
