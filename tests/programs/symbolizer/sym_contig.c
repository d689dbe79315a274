/* Split DWARF test program whose compile unit is one contiguous range (C, built with -fno-reorder-functions:
   no .text.startup, no COMDAT): DWARF 4 range lists of its inlined functions are then relative to the
   skeleton unit's DW_AT_low_pc. */
#include <stdlib.h>

static inline __attribute__((always_inline)) unsigned mix(unsigned x) {
  for (int k = 0; k < 8; ++k) x = x * 2654435761u + (x >> 13);
  return x;
}

static inline __attribute__((always_inline)) unsigned pick(unsigned x) {
  if (x & 1) return mix(x) + 1;
  return mix(x ^ 7) * 3;
}

__attribute__((noinline)) unsigned hot(unsigned n) {
  unsigned acc = 0;
  for (unsigned i = 0; i < n; ++i) acc ^= pick(i);
  return acc;
}

int main(int argc, char** argv) { return (int)(hot(argc > 1 ? (unsigned)atoi(argv[1]) : 1000u) & 1); }
