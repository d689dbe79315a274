#include "base/hex.h"

#include <charconv>

namespace fxprof {

namespace {

int digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

}  // namespace

bool parse_hex(std::string_view s, uint64_t& v) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || digit(s[0]) < 0) return false;  // from_chars would take a sign or skip nothing
  uint64_t out = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
  v = out;
  return true;
}

std::vector<uint8_t> parse_hex_bytes(std::string_view hex) {
  std::vector<uint8_t> out;
  if (hex.size() % 2 != 0) return {};
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return {};
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return out;
}

}  // namespace fxprof
