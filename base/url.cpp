#include "base/url.h"

#include <cstdlib>

namespace fxprof {

std::string profiler_origin() {
  std::string origin = "https://profiler.firefox.com";
  if (const char* env = std::getenv("PROFILER_URL"); env && *env) origin = env;
  while (!origin.empty() && origin.back() == '/') origin.pop_back();
  return origin;
}

std::string url_encode(std::string_view s, std::string_view keep) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
        ch == '_' || ch == '.' || ch == '~' || keep.find(static_cast<char>(ch)) != std::string_view::npos) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

std::string from_url_link(std::string_view profile_url, std::string_view tail) {
  return profiler_origin() + "/from-url/" + url_encode(profile_url) + std::string(tail);
}

}  // namespace fxprof
