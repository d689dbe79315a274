// Reading perf records' bodies (ProfileBuilder internals, builder*.cpp): a bounds-checked reader and the
// sample_id_all trailer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "base/byte_reader.h"

namespace fxprof::recorder::internal {

// Bounds-checked reader over one record's body (base's ByteReader, in the std::byte of the ring buffer).
class Reader {
 public:
  Reader(const std::byte* p, size_t size)
      : r_{reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + size} {}
  bool ok() const { return !r_.bad; }
  uint64_t u64() { return r_.get<uint64_t>(); }
  void u32x2(uint32_t& a, uint32_t& b) {
    uint64_t v = u64();
    a = static_cast<uint32_t>(v);
    b = static_cast<uint32_t>(v >> 32);
  }
  std::span<const std::byte> bytes(uint64_t n) {
    if (!r_.need(n)) return {};
    auto s = std::span<const std::byte>(pos(), n);
    r_.p += n;
    return s;
  }
  // A NUL-terminated string padded to 8 bytes, followed by the sample_id trailer (24 bytes: we ask for
  // TID, TIME, CPU).
  std::string str_before_trailer() {
    const size_t n = r_.left() - std::min<size_t>(r_.left(), 24);
    auto* s = reinterpret_cast<const char*>(r_.p);
    return std::string(s, strnlen(s, n));
  }
  const std::byte* pos() const { return reinterpret_cast<const std::byte*>(r_.p); }

 private:
  ByteReader r_;
};

// The sample_id_all trailer: pid/tid, time, cpu/res.
struct Trailer {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
};
inline Trailer trailer(const std::byte* rec, size_t size) {
  Trailer t;
  if (size < 8 + 24) return t;
  const std::byte* p = rec + size - 24;
  std::memcpy(&t.pid, p, 4);
  std::memcpy(&t.tid, p + 4, 4);
  std::memcpy(&t.time, p + 8, 8);
  return t;
}

}  // namespace fxprof::recorder::internal
