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

size_t StackTable::slot_of(StackId prefix, FrameId frame) const {
  uint64_t h = ((static_cast<uint64_t>(prefix) << 32) | frame) * 0x9E3779B97F4A7C15ull;
  const size_t mask = slots_.size() - 1;
  for (size_t i = static_cast<size_t>(h >> 32) & mask;; i = (i + 1) & mask) {
    const StackId id = slots_[i];
    if (id == kNoStack || (prefix_[id] == prefix && frame_[id] == frame)) return i;
  }
}

void StackTable::rehash(size_t n) {
  size_t cap = 16;
  while (cap * 3 < n * 4) cap *= 2;
  slots_.assign(cap, kNoStack);
  for (StackId id = 0; id < frame_.size(); ++id) slots_[slot_of(prefix_[id], frame_[id])] = id;
}

StackId StackTable::intern(StackId prefix, FrameId frame) {
  if ((frame_.size() + 1) * 4 > slots_.size() * 3) rehash(std::max<size_t>(2 * frame_.size(), 16));
  const size_t at = slot_of(prefix, frame);
  if (slots_[at] != kNoStack) return slots_[at];
  auto id = static_cast<StackId>(frame_.size());
  prefix_.push_back(prefix);
  frame_.push_back(frame);
  slots_[at] = id;
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
