// Internal to symbolizer/: the libraries known from profiles and the cache of loaded ones, least recently
// used first out when their bytes pass Options::cache_limit_bytes. Failed loads are cached too (a request
// naming an unknown library many times looks once), and count against the bound.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/result.h"
#include "symbolizer/library.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::symbolizer {

class LibraryCache {
 public:
  explicit LibraryCache(Options options) : options_(std::move(options)) {}

  // A library (re)registered after a lookup of the same key is looked for again with the new paths.
  void add_known(KnownLib lib);

  struct Slot;
  // A loaded library and its cache entry, for account() after use.
  struct Handle {
    std::shared_ptr<Library> lib;
    std::shared_ptr<Slot> slot;
  };
  // Loads the library once (concurrent callers wait for that one load) or gives the cached one.
  Result<Handle> get(std::string_view debug_name, std::string_view breakpad_id);
  // After using a library: its size may have grown (names interned, units indexed); evicts the least
  // recently used others while the cache is over its bound.
  void account(const Handle& handle);

 private:
  void account(const std::shared_ptr<Slot>& slot, size_t bytes);

  const Options options_;
  std::mutex mu_;                                    // guards everything below
  std::unordered_map<std::string, KnownLib> known_;  // key: debugName/BREAKPADID
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;
  size_t total_bytes_ = 0;
  uint64_t tick_ = 0;
};

}  // namespace fxprof::symbolizer
