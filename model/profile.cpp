#include "model/profile.h"

#include <algorithm>
#include <cstdio>

namespace fxprof::model {

StringId StringTable::intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  auto id = static_cast<StringId>(strings_.size());
  const std::string& stored = strings_.emplace_back(s);
  index_.emplace(std::string_view(stored), id);
  return id;
}

size_t FrameTable::KeyHash::operator()(const Frame& k) const noexcept {
  uint64_t h = k.address * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<uint64_t>(k.name) << 16) ^ (static_cast<uint64_t>(k.kind) << 8) ^
       static_cast<uint8_t>(k.category);
  h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
  h ^= (static_cast<uint64_t>(k.binary) << 32) ^ k.file ^ (static_cast<uint64_t>(k.line) << 8) ^
       k.inline_depth;
  return static_cast<size_t>(h ^ (h >> 31));
}

FrameId FrameTable::intern(const Frame& f) {
  auto it = index_.find(f);
  if (it != index_.end()) return it->second;
  auto id = static_cast<FrameId>(frames_.size());
  frames_.push_back(f);
  index_.emplace(f, id);
  return id;
}

namespace {
// (prefix, frame) through murmur3's 64-bit finaliser: the slot from the top bits, the tag from the low ones.
uint64_t stack_hash(StackId prefix, FrameId frame) {
  uint64_t h = (static_cast<uint64_t>(prefix) << 32) | frame;
  h = (h ^ (h >> 33)) * 0xFF51AFD7ED558CCDull;
  h = (h ^ (h >> 33)) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}
constexpr uint64_t kFreeSlot = UINT64_MAX;
}  // namespace

void StackTable::rehash(size_t n) {
  size_t cap = 16;
  int bits = 4;
  while (cap * 3 < n * 4) {
    cap *= 2;
    ++bits;
  }
  slots_.assign(cap, kFreeSlot);
  shift_ = 64 - bits;
  for (StackId id : wide_) {
    const uint64_t h = stack_hash(nodes_[id].prefix, nodes_[id].frame);
    size_t i = static_cast<size_t>(h >> shift_);
    while (slots_[i] != kFreeSlot) i = (i + 1) & (cap - 1);
    slots_[i] = (h << 32) | id;
  }
}

StackId StackTable::find_wide(StackId prefix, FrameId frame, uint64_t h, size_t& free_slot) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = static_cast<size_t>(h >> shift_);; i = (i + 1) & mask) {
    const uint64_t slot = slots_[i];
    if (slot == kFreeSlot) {
      free_slot = i;
      return kNoStack;
    }
    if ((slot >> 32) != (h & 0xFFFFFFFFu)) continue;
    const Node& n = nodes_[static_cast<StackId>(slot)];
    if (n.prefix == prefix && n.frame == frame) return static_cast<StackId>(slot);
  }
}

StackId StackTable::intern(StackId prefix, FrameId frame) {
  const auto id = static_cast<StackId>(nodes_.size());
  StackId& head = prefix == kNoStack ? first_root_ : nodes_[prefix].first_child;
  int listed = 0;
  for (StackId c = head, before = kNoStack; c != kNoStack; before = c, c = nodes_[c].next_sibling, ++listed) {
    if (nodes_[c].frame != frame) continue;
    if (before != kNoStack) {  // to the front: a stack found once is usually found again soon
      nodes_[before].next_sibling = nodes_[c].next_sibling;
      nodes_[c].next_sibling = head;
      head = c;
    }
    return c;
  }
  if (listed < kListed) {
    const StackId next = head;
    head = id;  // before push_back, which may move the node `head` is in
    nodes_.push_back({prefix, frame, kNoStack, next});
    return id;
  }
  if ((wide_.size() + 1) * 4 > slots_.size() * 3) rehash(std::max<size_t>(2 * wide_.size(), 16));
  const uint64_t h = stack_hash(prefix, frame);
  size_t at = 0;
  if (StackId found = find_wide(prefix, frame, h, at); found != kNoStack) return found;
  nodes_.push_back({prefix, frame, kNoStack, kNoStack});
  wide_.push_back(id);
  slots_[at] = (h << 32) | id;
  return id;
}

StackId StackTable::intern_path(std::span<const FrameId> root_to_leaf) {
  StackId s = kNoStack;
  for (FrameId f : root_to_leaf) s = intern(s, f);
  return s;
}

BinaryId Profile::intern_binary(const Lib& lib) {
  std::string key = !lib.breakpad_id.empty() ? "id\n" + lib.debug_name + "\n" + lib.breakpad_id
                                             : "path\n" + lib.path + "\n" + lib.name;
  auto [it, inserted] = binary_index.try_emplace(std::move(key), static_cast<BinaryId>(binaries.size()));
  if (!inserted) return it->second;
  binaries.push_back({lib.name, lib.path, lib.debug_name, lib.debug_path, lib.breakpad_id, lib.code_id,
                      lib.arch, lib.read_path});
  return static_cast<BinaryId>(binaries.size() - 1);
}

}  // namespace fxprof::model
