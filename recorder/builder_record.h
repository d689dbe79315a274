// Reading perf records' bodies (ProfileBuilder internals, builder*.cpp): a bounds-checked reader and the
// sample_id_all trailer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace fxprof::recorder::internal {

// Bounds-checked reader over one record's body.
class Reader {
 public:
  Reader(const std::byte* p, size_t size) : p_(p), end_(p + size) {}
  bool ok() const { return ok_; }
  uint64_t u64() {
    uint64_t v = 0;
    if (end_ - p_ < 8) {
      ok_ = false;
      return 0;
    }
    std::memcpy(&v, p_, 8);
    p_ += 8;
    return v;
  }
  void u32x2(uint32_t& a, uint32_t& b) {
    uint64_t v = u64();
    a = static_cast<uint32_t>(v);
    b = static_cast<uint32_t>(v >> 32);
  }
  std::span<const std::byte> bytes(uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) {
      ok_ = false;
      return {};
    }
    auto s = std::span<const std::byte>(p_, n);
    p_ += n;
    return s;
  }
  // A NUL-terminated string padded to 8 bytes, followed by the sample_id trailer (24 bytes: we ask for
  // TID, TIME, CPU).
  std::string str_before_trailer() {
    const std::byte* limit = end_ - std::min<ptrdiff_t>(end_ - p_, 24);
    auto* s = reinterpret_cast<const char*>(p_);
    size_t n = strnlen(s, static_cast<size_t>(limit - p_));
    return std::string(s, n);
  }
  const std::byte* pos() const { return p_; }

 private:
  const std::byte* p_;
  const std::byte* end_;
  bool ok_ = true;
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
