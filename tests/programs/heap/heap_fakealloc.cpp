// A program with functions named je_malloc and je_free that are no allocator (a checksum and a counter), as
// any program may name its own functions: `heap_fakealloc N` calls each N times and allocates nothing itself.
// fxprof must not take their arguments and results for blocks.
#include <cstddef>
#include <cstdio>
#include <cstdlib>

static unsigned char g_table[4096];
static size_t g_count;

extern "C" __attribute__((noinline, used)) void* je_malloc(size_t n) {
  size_t sum = 0;
  for (size_t i = 0; i < 64; ++i) sum += g_table[(n + i) % sizeof g_table];
  return g_table + (sum + n) % sizeof g_table;
}

extern "C" __attribute__((noinline, used)) void je_free(void* p) { g_count += p != nullptr; }

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 1000;
  for (long i = 0; i < n; ++i) je_free(je_malloc(static_cast<size_t>(1) << 30 | static_cast<size_t>(i)));
  std::printf("%zu\n", g_count);
  return 0;
}
