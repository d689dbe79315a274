#include "heap/shim_sampling.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>

namespace fxprof::heap::shim {
namespace {

// Open addressing keyed by the bit, so that the blocks sharing a bit lie in one run of slots from the bit's
// home and a bit is cleared only with the last of them. Grows by mmap at half full.
struct SampledSet {
  std::atomic<int> lock{0};
  uint64_t* addrs = nullptr;  // 0 = empty slot
  size_t cap = 0, used = 0;
};
SampledSet table;

size_t home(size_t bit, size_t cap) {
  return static_cast<size_t>((uint64_t{bit} * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}
size_t bit_of(uint64_t addr) { return addr_bit(reinterpret_cast<void*>(addr)); }

}  // namespace

void set_lock() {
  while (table.lock.exchange(1, std::memory_order_acquire) != 0) {
  }
}

void set_unlock() { table.lock.store(0, std::memory_order_release); }

bool set_insert(uint64_t addr) {
  SampledSet& t = table;
  if ((t.used + 1) * 2 > t.cap) {
    const size_t cap = t.cap ? t.cap * 2 : 4096;
    void* m = mmap(nullptr, cap * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return false;
    auto* fresh = static_cast<uint64_t*>(m);
    for (size_t i = 0; i < t.cap; ++i) {
      if (!t.addrs[i]) continue;
      size_t j = home(bit_of(t.addrs[i]), cap);
      while (fresh[j]) j = (j + 1) & (cap - 1);
      fresh[j] = t.addrs[i];
    }
    if (t.addrs) munmap(t.addrs, t.cap * 8);
    t.addrs = fresh;
    t.cap = cap;
  }
  size_t j = home(bit_of(addr), t.cap);
  while (t.addrs[j] && t.addrs[j] != addr) j = (j + 1) & (t.cap - 1);
  if (!t.addrs[j]) ++t.used;
  t.addrs[j] = addr;
  return true;
}

bool set_erase(uint64_t addr, bool& bit_shared) {
  SampledSet& t = table;
  if (!t.cap) return false;
  const size_t bit = bit_of(addr);
  const size_t mask = t.cap - 1;
  size_t i = home(bit, t.cap);
  while (t.addrs[i] && t.addrs[i] != addr) i = (i + 1) & mask;
  if (!t.addrs[i]) return false;
  // Backward-shift deletion: no tombstones, every entry stays reachable from its home.
  for (size_t j = (i + 1) & mask; t.addrs[j]; j = (j + 1) & mask) {
    const size_t h = home(bit_of(t.addrs[j]), t.cap);
    if (((j - h) & mask) >= ((j - i) & mask)) {
      t.addrs[i] = t.addrs[j];
      i = j;
    }
  }
  t.addrs[i] = 0;
  --t.used;
  bit_shared = false;
  for (size_t j = home(bit, t.cap); t.addrs[j] && !bit_shared; j = (j + 1) & mask)
    bit_shared = bit_of(t.addrs[j]) == bit;
  return true;
}

int64_t exponential_draw(uint64_t& rng, double rate) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  const uint64_t r = rng * 2685821657736338717ull;
  const double u = (static_cast<double>(r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  return std::max<int64_t>(1, std::llround(-std::log(u) * rate));
}

}  // namespace fxprof::heap::shim
