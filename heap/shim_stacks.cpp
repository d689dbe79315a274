#include "heap/shim_stacks.h"

#include <cstring>
#include <initializer_list>

namespace fxprof::heap::shim {

uint64_t stack_hash(const uint64_t* frames, size_t count) {
  // Four independent multiply chains, folded at the end: one chain over ~45 frames waited on each multiply
  // in turn (half of the interning's time on python).
  constexpr uint64_t kMul = 0xFF51AFD7ED558CCDull;
  uint64_t a = 1469598103934665603ull, b = 0x9E3779B97F4A7C15ull, c = 0xC2B2AE3D27D4EB4Full,
           d = 0x165667B19E3779F9ull;
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    a = (a ^ frames[i]) * kMul;
    b = (b ^ frames[i + 1]) * kMul;
    c = (c ^ frames[i + 2]) * kMul;
    d = (d ^ frames[i + 3]) * kMul;
  }
  for (; i < count; ++i) a = (a ^ frames[i]) * kMul;
  uint64_t h = static_cast<uint64_t>(count);
  for (uint64_t l : {a, b, c, d}) h = (h ^ l ^ (l >> 29)) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 32);
}

StackCache::Found StackCache::find(uint64_t h) {
  Slot& recent = recent_[(h >> 20) & (kRecent - 1)];  // other bits than the slots' home
  if (recent.used && recent.hash == h) return {recent.id, false};
  const size_t home = static_cast<size_t>(h) & (kSlots - 1);
  for (size_t probe = 0; probe < 16; ++probe) {
    Slot& s = slots_[(home + probe) & (kSlots - 1)];
    if (s.used && s.hash == h) {
      recent = s;
      return {s.id, false};
    }
    if (!s.used) {
      s = {h, next_id_++, 1};
      recent = s;
      return {s.id, true};
    }
  }
  // A crowded neighbourhood: start over (the recent stacks keep their ids, which stay defined).
  std::memset(slots_, 0, sizeof slots_);
  Slot& s = slots_[home];
  s = {h, next_id_++, 1};
  recent = s;
  return {s.id, true};
}

uint32_t StackCache::share_outer(const uint64_t* frames, uint32_t count) {
  const uint32_t most = count < last_count_ ? count : last_count_;
  uint32_t same = 0;
  while (same < most && frames[count - 1 - same] == last_[last_count_ - 1 - same]) ++same;
  std::memcpy(last_, frames, count * sizeof(uint64_t));
  last_count_ = count;
  return same;
}

void StackCache::reset() {
  next_id_ = 0;
  last_count_ = 0;
  std::memset(recent_, 0, sizeof recent_);
  std::memset(slots_, 0, sizeof slots_);
}

}  // namespace fxprof::heap::shim
