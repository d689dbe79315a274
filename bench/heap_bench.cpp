// The malloc+free microbenchmark of bench/heap.sh: N iterations of malloc(SIZE)+free under a 4-frame call
// chain (noinline), so every allocation has a stack to unwind. Prints ns per iteration.
#include <chrono>
#include <cstdio>
#include <cstdlib>

void* volatile g_sink;

__attribute__((noinline)) void level4(size_t size) {
  void* p = malloc(size);
  g_sink = p;
  free(p);
}
__attribute__((noinline)) void level3(size_t s) {
  level4(s);
  asm volatile("");
}
__attribute__((noinline)) void level2(size_t s) {
  level3(s);
  asm volatile("");
}
__attribute__((noinline)) void level1(size_t s) {
  level2(s);
  asm volatile("");
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  size_t size = argc > 2 ? static_cast<size_t>(atol(argv[2])) : 64;
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) level1(size + static_cast<size_t>(i & 7));
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.1f ns per malloc+free\n", ns / static_cast<double>(n));
  return 0;
}
