// fxprof heap shim (heap/shim.cpp): the sampling decision of --heap=sampled, apart from the recording.
// Compiled into libfxprof_heap.so only; nothing here calls malloc (tables are mmap'd).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fxprof::heap::shim {

// The bitmap of sampled addresses that the free fast path reads: 16-byte granules over 128 MiB, the turn
// number mixed in, so a free touches the bitmap line of its neighbours (a hashed index cost a cache miss per
// free in a large heap).
inline constexpr size_t kBitmapBits = size_t{1} << 23;  // 1 MiB
inline size_t addr_bit(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  return static_cast<size_t>((v >> 4) ^ ((v >> 27) * 0x9E3779B1u)) & (kBitmapBits - 1);
}

// The live sampled blocks, exactly, behind the bitmap (the slow path's answer). A bit stands for one granule
// in every 128 MiB of addresses, so an unsampled block elsewhere can share a sampled block's bit: when the
// bit alone decided, that block's free cleared the bit, the sampled block's own free later went unseen, and
// the profile showed a phantom leak of ~rate bytes and an in-use estimate that stayed high (python's heap
// spans several 128 MiB turns). One spin lock, taken by sampled allocations and by frees whose bit is set.
void set_lock();
void set_unlock();
// Adds a sampled block's address (lock held); false when no memory could be had for the table.
bool set_insert(uint64_t addr);
// Removes `addr` (lock held): false when it is not a live sampled block. `bit_shared`: another live sampled
// block has the same bit (which must then stay set).
bool set_erase(uint64_t addr, bool& bit_shared);

// A generator state from a seed (splitmix64's finaliser; never 0, where xorshift would stay).
inline uint64_t mix_seed(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z ? z : 0x9E3779B97F4A7C15ull;
}

// The next countdown: an exponential draw of mean `rate` bytes (xorshift64* then -ln(U) * rate), at least 1.
int64_t exponential_draw(uint64_t& rng, double rate);

}  // namespace fxprof::heap::shim
