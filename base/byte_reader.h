// fxprof base: bounds-checked reading of bytes in memory (ELF images, DWARF line programs, call-frame
// information). A malformed file never reads out of bounds: any overrun sets `bad`, moves to the end and
// reads zeros. Inline, because the unwinder parses CFI with it while it unwinds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace fxprof {

// Reads forward from `p` to `end` (x86-64 byte order: little-endian).
struct ByteReader {
  const uint8_t* p = nullptr;
  const uint8_t* end = nullptr;
  bool bad = false;

  size_t left() const { return static_cast<size_t>(end - p); }
  // False (and bad, at the end) when fewer than `n` bytes are left or a read already failed.
  bool need(uint64_t n) {
    if (bad || left() < n) {
      bad = true;
      p = end;
      return false;
    }
    return true;
  }
  // A value of a fixed-size type as the file holds it.
  template <class T>
  T get() {
    T v{};
    if (!need(sizeof(T))) return v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint8_t u8() { return get<uint8_t>(); }
  // An unsigned value of `n` bytes (1 to 8; DWARF's data forms and offset sizes).
  uint64_t fixed(size_t n) {
    if (!need(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    p += n;
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (!need(1)) return 0;
      const uint8_t b = *p++;
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      if (!need(1)) return 0;
      b = *p++;
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;  // sign-extend
    return static_cast<int64_t>(v);
  }
  // A NUL-terminated string; "" (and bad) when it is not terminated before the end.
  const char* cstr() {
    const void* nul = bad ? nullptr : std::memchr(p, 0, left());
    if (nul == nullptr) {
      bad = true;
      p = end;
      return "";
    }
    const char* s = reinterpret_cast<const char*>(p);
    p = static_cast<const uint8_t*>(nul) + 1;
    return s;
  }
  void skip(uint64_t n) {
    if (need(n)) p += n;
  }
};

// A value of type T at byte `off` of `image`; false when it does not fit.
template <class T>
bool read_at(std::span<const std::byte> image, uint64_t off, T& out) {
  if (off > image.size() || image.size() - off < sizeof(T)) return false;
  std::memcpy(&out, image.data() + off, sizeof(T));
  return true;
}

}  // namespace fxprof
