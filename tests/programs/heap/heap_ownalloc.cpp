// A program with an allocator of its own linked in, as a statically linked jemalloc would be: je_malloc and
// je_free hand out blocks of a static arena, never calling the C library's malloc, so the heap library sees
// none of them. `heap_ownalloc N`: N blocks of 100 bytes, half of them freed (the arena wraps around).
#include <cstddef>
#include <cstdlib>

alignas(16) static char g_arena[1 << 20];
static size_t g_used;
void* volatile g_sink;

extern "C" __attribute__((noinline, used)) void* je_malloc(size_t n) {
  n = (n + 15) & ~size_t{15};
  if (g_used + n > sizeof g_arena) return nullptr;
  void* p = g_arena + g_used;
  g_used += n;
  return p;
}

extern "C" __attribute__((noinline, used)) void je_free(void* p) { g_sink = p; }

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  for (int i = 0; i < n; ++i) {
    void* p = je_malloc(100);
    if (!p) g_used = 0;  // the arena starts over: the program runs long enough to be sampled
    g_sink = p;
    if (i % 2) je_free(p);
  }
  return 0;
}
