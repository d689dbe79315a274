// Shared library the unwind tests dlopen: lib_outer -> lib_inner, both without frame pointers.
#include <cstdint>

namespace {
volatile uint64_t lib_sink;
}

extern "C" __attribute__((noinline)) uint64_t lib_inner(uint64_t n) {
  uint64_t x = n;
  for (uint64_t i = 0; i < 200000; ++i) x = x * 6364136223846793005ull + i;
  lib_sink = x;
  return x;
}

extern "C" __attribute__((noinline, visibility("default"))) uint64_t lib_outer(uint64_t n) {
  uint64_t r = lib_inner(n);
  lib_sink = lib_sink + 1;
  return r + 1;
}
