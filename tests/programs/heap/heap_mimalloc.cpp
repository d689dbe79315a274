// A program that links mimalloc as a shared library (libmimalloc.so) and calls its own API: mi_malloc,
// mi_calloc, mi_zalloc, mi_realloc, mi_malloc_aligned, mi_strdup and mi_free never go through malloc, so
// the heap library sees them only by defining the same names (heap/shim_mimalloc.cpp). It also calls
// posix_memalign, which libmimalloc.so overrides and forwards to mi_posix_memalign through the PLT: counted
// once. Prints its own truth: "allocations A bytes B frees F leaked L blocks, LB bytes"
//   heap_mimalloc N   N rounds
#include <mimalloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 1000;
  unsigned long allocations = 0, bytes = 0, frees = 0, leaked = 0, leaked_bytes = 0;
  for (int i = 0; i < rounds; ++i) {
    void* a = mi_malloc(100);
    void* b = mi_calloc(10, 30);
    void* c = mi_zalloc(40);
    c = mi_realloc(c, 400);  // a free of the 40-byte block and an allocation of 400
    void* d = mi_malloc_aligned(256, 64);
    char* e = mi_strdup("fxprof");  // 7 bytes
    void* f = nullptr;
    if (posix_memalign(&f, 64, 128) != 0) return 1;
    if (!a || !b || !c || !d || !e || !f) return 1;
    allocations += 7;
    bytes += 100 + 300 + 40 + 400 + 256 + 7 + 128;
    mi_free(a);
    mi_free(b);
    mi_free(e);
    free(f);
    frees += 5;  // (the realloc's)
    if (i % 2) {
      mi_free(c);
      mi_free(d);
      frees += 2;
    } else {
      leaked += 2;
      leaked_bytes += 400 + 256;
    }
  }
  std::printf("allocations %lu bytes %lu frees %lu leaked %lu blocks, %lu bytes\n", allocations, bytes, frees,
              leaked, leaked_bytes);
  return 0;
}
