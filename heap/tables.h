// fxprof heap: the tables the recorder folds the events with (heap/source.cpp, heap/source_fold.cpp);
// internal to heap/.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "heap/wire.h"
#include "model/profile.h"

namespace fxprof::heap {

// std::allocator, with the storage advised MADV_HUGEPAGE before it is first touched: with transparent huge
// pages in `madvise` mode, the event list (hundreds of MB) and the live-block table otherwise fill by 4 KiB
// faults, and each random probe of the table missed the TLB as well as the cache (under a VM's nested
// paging).
template <class T>
struct HugeAllocator {
  using value_type = T;
  HugeAllocator() = default;
  template <class U>
  explicit HugeAllocator(const HugeAllocator<U>&) {}
  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    const size_t huge = kHugePageBytes;
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + huge - 1) & ~(huge - 1);
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n * sizeof(T)) & ~(huge - 1);
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
    return p;
  }
  void deallocate(T* p, size_t n) { std::allocator<T>().deallocate(p, n); }
  bool operator==(const HugeAllocator&) const = default;
};

// Sorts `v` stably by `less`, merging the ascending runs it already consists of (one per chunk or longer): a
// single-threaded program's events are one run, a parent's last chunk after its child's one more merge,
// where std::stable_sort paid ~20 passes over every event each time.
template <class V, class Less>
void merge_runs(V& v, Less less) {
  std::vector<size_t> bounds{0};
  for (size_t i = 1; i < v.size(); ++i)
    if (less(v[i], v[i - 1])) bounds.push_back(i);
  bounds.push_back(v.size());
  while (bounds.size() > 2) {
    std::vector<size_t> next{0};
    for (size_t r = 0; r + 2 < bounds.size(); r += 2) {
      std::inplace_merge(v.begin() + static_cast<ptrdiff_t>(bounds[r]),
                         v.begin() + static_cast<ptrdiff_t>(bounds[r + 1]),
                         v.begin() + static_cast<ptrdiff_t>(bounds[r + 2]), less);
      next.push_back(bounds[r + 2]);
    }
    if (bounds.size() % 2 == 0) next.push_back(bounds.back());  // an odd run out waits for the next round
    bounds = std::move(next);
  }
}

// Live blocks: (pid, address) -> the allocation's event index. Open addressing with linear probing, deletion
// by backward shift (no tombstones), doubled at three quarters full: std::unordered_map's node per block was a
// malloc, a free and a cache miss per event, a third of finish() with 5M allocations. (At half full, python's
// 1.2M live blocks made 128 MB of tables on the way to a 64 MB one, whose fresh pages the kernel zeroed for
// 0.56 s of the worker's CPU; a probe runs on into the next slots, mostly the same cache line.)
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
    if ((used_ + 1) * 4 > slots_.size() * 3) grow();
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
  // Starts loading the home slot of (pid, addr): finish() asks a few events ahead, so that the table's cache
  // misses (one per event in a heap of millions of blocks) overlap instead of following one another.
  void prefetch(uint32_t pid, uint64_t addr) const { __builtin_prefetch(&slots_[home(pid, addr)]); }
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
    std::vector<Slot, HugeAllocator<Slot>> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const Slot& s : old)
      if (s.event != kEmpty) insert(s.pid, s.addr, s.event);
  }
  std::vector<Slot, HugeAllocator<Slot>> slots_;
  size_t used_ = 0;
};

// The stacks the shim defines, as paths in one tree of call sites, root side first: the worker interns each
// definition as it comes (the threads' and processes' definitions of one call path become one node), so that
// finish() translates each distinct prefix into the model once: interning every frame of every stack there
// was most of finish() on cc1plus's deep stacks. The tree is a model::StackTable over the distinct return
// addresses' indices (its child lists find a node below the one just made or found without a cache miss in
// a million-node hash table); finish() makes one model frame per address.
class StackTrie {
 public:
  static constexpr uint32_t kRoot = model::kNoStack;  // the empty stack (also: no stack)
  // The node of a definition (heap/wire.h): `inner` frames, leaf first, below the `shared` outermost nodes
  // of `path`, the thread's previous definition's nodes (root first), which becomes this one's. Its shared
  // part is not looked up again (more than half of cc1plus's frames). cc1plus's 120k definitions of 45 frames
  // on average, 1M nodes: 0.26-0.35 s through a hash table of (parent, address), 0.08-0.10 s so.
  // kNone when the definition is not one (`shared` beyond `path`, or deeper than the shim ever sends).
  static constexpr uint32_t kNone = UINT32_MAX - 1;
  uint32_t intern(std::span<const uint64_t> inner, size_t shared, std::vector<uint32_t>& path) {
    if (shared > path.size() || shared + inner.size() > wire::kMaxFrames) return kNone;
    path.resize(shared);
    uint32_t node = shared ? path.back() : kRoot;
    for (size_t i = inner.size(); i-- > 0;) {
      node = table_.intern(node, index_of(inner[i]));
      path.push_back(node);
    }
    return node;
  }
  size_t size() const { return table_.size(); }
  uint32_t parent(uint32_t node) const { return table_.prefix(node); }
  uint32_t addr_index(uint32_t node) const { return table_.frame(node); }  // see address()
  uint64_t address(uint32_t addr_index) const { return addrs_[addr_index]; }
  size_t addresses() const { return addrs_.size(); }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  // Address -> index, open addressing over (address, index) pairs: a few thousand distinct addresses.
  uint32_t index_of(uint64_t addr) {
    for (size_t i = addr_home(addr);; i = (i + 1) & (addr_slots_.size() - 1)) {
      auto& [a, index] = addr_slots_[i];
      if (index == kEmpty) {
        a = addr;
        index = static_cast<uint32_t>(addrs_.size());
        addrs_.push_back(addr);
        if (addrs_.size() * 2 > addr_slots_.size()) grow_addrs();
        return static_cast<uint32_t>(addrs_.size() - 1);
      }
      if (a == addr) return index;
    }
  }
  size_t addr_home(uint64_t addr) const {
    return static_cast<size_t>((addr * 0x9E3779B97F4A7C15ull) >> 24) & (addr_slots_.size() - 1);
  }
  void grow_addrs() {
    std::vector<std::pair<uint64_t, uint32_t>>(addr_slots_.size() * 2, {0, kEmpty}).swap(addr_slots_);
    for (uint32_t index = 0; index < addrs_.size(); ++index)
      for (size_t i = addr_home(addrs_[index]);; i = (i + 1) & (addr_slots_.size() - 1))
        if (addr_slots_[i].second == kEmpty) {
          addr_slots_[i] = {addrs_[index], index};
          break;
        }
  }
  model::StackTable table_;
  std::vector<uint64_t> addrs_;  // by index
  std::vector<std::pair<uint64_t, uint32_t>> addr_slots_ =
      std::vector<std::pair<uint64_t, uint32_t>>(size_t{1} << 10, {0, kEmpty});
};

}  // namespace fxprof::heap
