// A program with an allocator of its own linked in, as a statically linked jemalloc would be: its je_malloc,
// je_calloc, je_realloc, je_posix_memalign, je_aligned_alloc and je_free hand out blocks of a static arena,
// never calling the C library's malloc, so the heap library sees none of them.
//   heap_ownalloc N          N je_malloc(100) blocks, half of them je_free'd (the arena wraps around)
//   heap_ownalloc family N   N rounds of each entry point (calloc, malloc then realloc, posix_memalign,
//                            aligned_alloc), half of the rounds' last blocks kept; prints its own truth:
//                            "allocations A bytes B frees F leaked L blocks, LB bytes"
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

alignas(64) static char g_arena[4 << 20];
static size_t g_used;
void* volatile g_sink;

// The arena's next block of `n` bytes at `align` (the entry points' shared helper: none calls another).
static void* carve(size_t n, size_t align) {
  const size_t at = (g_used + align - 1) & ~(align - 1);
  n = (n + 15) & ~size_t{15};
  if (at + n > sizeof g_arena) return nullptr;
  g_used = at + n;
  return g_arena + at;
}

extern "C" __attribute__((noinline, used)) void* je_malloc(size_t n) { return carve(n, 16); }

extern "C" __attribute__((noinline, used)) void je_free(void* p) { g_sink = p; }

extern "C" __attribute__((noinline, used)) void* je_calloc(size_t n, size_t size) {
  void* p = carve(n * size, 16);
  if (p) std::memset(p, 0, n * size);
  return p;
}

// Always moves (a new block; `old`'s bytes are not needed by this program).
extern "C" __attribute__((noinline, used)) void* je_realloc(void* old, size_t n) {
  g_sink = old;
  return carve(n, 16);
}

extern "C" __attribute__((noinline, used)) int je_posix_memalign(void** out, size_t align, size_t n) {
  void* p = carve(n, align);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}

extern "C" __attribute__((noinline, used)) void* je_aligned_alloc(size_t align, size_t n) {
  return carve(n, align);
}

static int family(int rounds) {
  unsigned long allocations = 0, bytes = 0, frees = 0, leaked = 0, leaked_bytes = 0;
  for (int i = 0; i < rounds; ++i) {
    void* a = je_calloc(10, 10);
    void* b = je_malloc(50);
    b = je_realloc(b, 200);  // a free of the 50-byte block and an allocation of 200
    void* c = nullptr;
    if (je_posix_memalign(&c, 64, 300) != 0) return 1;
    void* d = je_aligned_alloc(64, 128);
    if (!a || !b || !d) return 1;
    allocations += 5;
    bytes += 100 + 50 + 200 + 300 + 128;
    je_free(a);
    je_free(c);
    frees += 3;  // (the realloc's)
    if (i % 2) {
      je_free(b);
      je_free(d);
      frees += 2;
    } else {
      leaked += 2;
      leaked_bytes += 200 + 128;
    }
  }
  std::printf("allocations %lu bytes %lu frees %lu leaked %lu blocks, %lu bytes\n", allocations, bytes, frees,
              leaked, leaked_bytes);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "family") == 0) return family(atoi(argv[2]));
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  for (int i = 0; i < n; ++i) {
    void* p = je_malloc(100);
    if (!p) g_used = 0;  // the arena starts over: the program runs long enough to be sampled
    g_sink = p;
    if (i % 2) je_free(p);
  }
  return 0;
}
