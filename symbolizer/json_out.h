// Internal to symbolizer/: appending JSON values to an in-memory response (the APIs answer strings, not
// files).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_string.h"

namespace fxprof::symbolizer::json {

// A JSON string literal, quotes included; control characters escaped, invalid UTF-8 bytes become U+FFFD.
inline void str(std::string& out, std::string_view s) { append_json_string(out, s); }

inline void uint(std::string& out, uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  out.append(p, static_cast<size_t>(buf + sizeof buf - p));
}

// "0x…" in lowercase hex, quotes included.
inline void hex(std::string& out, uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '"';
  do {
    *--p = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  *--p = '"';
  out.append(p, static_cast<size_t>(buf + sizeof buf - p));
}

}  // namespace fxprof::symbolizer::json
