// fxprof base: the last component of a path, as the profile names a binary ("libc.so.6" for
// /usr/lib/x86_64-linux-gnu/libc.so.6) and as messages name a file. Header-only: model/ uses it too.
#pragma once

#include <string_view>

namespace fxprof {

// What follows the last '/', or the whole path without one ("" for a path ending in '/').
constexpr std::string_view base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace fxprof
