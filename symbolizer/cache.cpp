#include "symbolizer/cache.h"

namespace fxprof::symbolizer {

// One cache entry: loaded once (concurrent askers wait on load_mu), evicted least-recently-used.
struct LibraryCache::Slot {
  std::string key;  // immutable
  std::mutex load_mu;
  bool done = false;
  std::shared_ptr<Library> lib;
  std::string error;
  size_t bytes = 0;  // guarded by the cache's mu_, as last_use
  uint64_t last_use = 0;
};

namespace {
std::string key_of(std::string_view debug_name, std::string_view breakpad_id) {
  return std::string(debug_name) + "/" + upper(breakpad_id);
}
}  // namespace

void LibraryCache::add_known(KnownLib lib) {
  if (lib.debug_name.empty() || lib.breakpad_id.empty()) return;
  std::string key = key_of(lib.debug_name, lib.breakpad_id);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto known = known_.find(key); known != known_.end() && known->second == lib) return;
  if (auto it = slots_.find(key); it != slots_.end()) {
    total_bytes_ -= it->second->bytes;
    slots_.erase(it);
  }
  known_[key] = std::move(lib);
}

Result<LibraryCache::Handle> LibraryCache::get(std::string_view debug_name, std::string_view breakpad_id) {
  std::string key = key_of(debug_name, breakpad_id);
  std::shared_ptr<Slot> slot;
  KnownLib k;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& s = slots_[key];
    if (!s) {
      s = std::make_shared<Slot>();
      s->key = key;
    }
    slot = s;
    slot->last_use = ++tick_;
    if (auto it = known_.find(key); it != known_.end()) {
      k = it->second;
    } else {
      k.debug_name = std::string(debug_name);
      k.breakpad_id = std::string(breakpad_id);
    }
  }
  {
    std::lock_guard<std::mutex> lock(slot->load_mu);
    if (!slot->done) {
      auto r = load_library(k, options_);
      if (r) {
        slot->lib = std::move(r).value();
      } else {
        slot->error = r.error();
      }
      slot->done = true;
    }
  }
  if (!slot->lib) {
    account(slot, sizeof(Slot) + 128 + slot->error.size());  // must not grow the cache without bound
    return Err(slot->error);
  }
  return Handle{slot->lib, slot};
}

void LibraryCache::account(const Handle& handle) {
  size_t bytes;
  {
    std::lock_guard<std::mutex> lock(handle.lib->mu);
    bytes = handle.lib->memory_bytes();
  }
  account(handle.slot, bytes);
}

void LibraryCache::account(const std::shared_ptr<Slot>& slot, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  // The slot may have been evicted meanwhile: only account for slots still in the map.
  if (auto it = slots_.find(slot->key); it == slots_.end() || it->second != slot) return;
  total_bytes_ = total_bytes_ - slot->bytes + bytes;
  slot->bytes = bytes;
  while (total_bytes_ > options_.cache_limit_bytes) {
    auto victim = slots_.end();
    for (auto i = slots_.begin(); i != slots_.end(); ++i) {
      if (i->second == slot || i->second->bytes == 0) continue;
      if (victim == slots_.end() || i->second->last_use < victim->second->last_use) victim = i;
    }
    if (victim == slots_.end()) break;
    total_bytes_ -= victim->second->bytes;
    slots_.erase(victim);
  }
}

}  // namespace fxprof::symbolizer
