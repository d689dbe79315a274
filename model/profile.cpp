#include "model/profile.h"

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

StackId StackTable::intern(StackId prefix, FrameId frame) {
  uint64_t key = (static_cast<uint64_t>(prefix) << 32) | frame;
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  auto id = static_cast<StackId>(frame_.size());
  prefix_.push_back(prefix);
  frame_.push_back(frame);
  index_.emplace(key, id);
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
