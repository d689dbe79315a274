// The demangler (C++ and Rust legacy/v0 names from symbol tables of binaries we did not build).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "symbolizer/demangle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view name(reinterpret_cast<const char*>(data), size);
  auto out = fxprof::symbolizer::demangle(name);
  (void)out;
  return 0;
}
