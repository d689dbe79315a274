// Issue 21 item 9: a CPU-bound program that the test strips: hot_leaf is the leaf of nearly every sample and
// work its caller, so with one spelling per function their totals add up (work ~100%, hot_leaf ~100%).
// Usage: stripped_work [ROUNDS] (default 3000: ~0.3 s of CPU).
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long hot_leaf(unsigned long x) {
  for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}

__attribute__((noinline)) void work(long rounds) {
  unsigned long x = 1;
  for (long r = 0; r < rounds; ++r) x = hot_leaf(x);
  sink = x;
}

int main(int argc, char** argv) {
  work(argc > 1 ? atol(argv[1]) : 3000);
  return 0;
}
