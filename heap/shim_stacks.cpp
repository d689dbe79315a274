#include "heap/shim_stacks.h"

#include <cstring>

namespace fxprof::heap::shim {

StackCache::Found StackCache::find(uint64_t h) {
  const size_t home = static_cast<size_t>(h) & (kSlots - 1);
  for (size_t probe = 0; probe < 16; ++probe) {
    Slot& s = slots_[(home + probe) & (kSlots - 1)];
    if (s.used && s.hash == h) return {s.id, false};
    if (!s.used) {
      s = {h, next_id_++, 1};
      return {s.id, true};
    }
  }
  // A crowded neighbourhood: start over.
  std::memset(slots_, 0, sizeof slots_);
  slots_[home] = {h, next_id_++, 1};
  return {slots_[home].id, true};
}

uint32_t StackCache::share_outer(void* const* frames, uint32_t count) {
  const uint32_t most = count < last_count_ ? count : last_count_;
  uint32_t same = 0;
  while (same < most && frames[count - 1 - same] == last_[last_count_ - 1 - same]) ++same;
  std::memcpy(last_, frames, count * sizeof(void*));
  last_count_ = count;
  return same;
}

void StackCache::reset() {
  next_id_ = 0;
  last_count_ = 0;
  std::memset(slots_, 0, sizeof slots_);
}

}  // namespace fxprof::heap::shim
