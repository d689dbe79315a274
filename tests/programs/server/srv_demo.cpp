// A small program whose functions the server tests look up: compute_hot() with an inlined helper, and
// first_fn() ending in a call that never returns, laid out right before second_fn() (built with
// -falign-functions=1 -fno-toplevel-reorder), so first_fn's return address is second_fn's first byte.
#include <cstdio>
#include <cstdlib>

extern "C" {
volatile long sink;

// Unsigned: the sums wrap, which is fine here and no UB under UBSan.
static inline __attribute__((always_inline)) unsigned long inlined_helper(unsigned long x) {
  unsigned long s = 0;
  for (unsigned long i = 0; i < x; i++) s += (i * i) ^ (s >> 3);
  return s;
}

__attribute__((noipa)) long compute_hot(long n) {
  unsigned long t = 0;
  for (long k = 0; k < n; ++k) t += inlined_helper(static_cast<unsigned long>(k % 1000));
  return static_cast<long>(t);
}

__attribute__((noipa, noreturn)) void die_now(long v) { std::exit(static_cast<int>(v & 1)); }

__attribute__((noipa, noreturn)) void first_fn(long v) {
  sink = compute_hot(v);
  die_now(sink);
}

__attribute__((noipa)) long second_fn(long v) { return compute_hot(v) ^ 1; }

__attribute__((noipa)) long outer_work(long n) { return second_fn(n) ^ compute_hot(n / 2); }
}

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 20000;
  sink = outer_work(n);
  if (argc > 2) first_fn(n);
  std::printf("%ld\n", static_cast<long>(sink));
  return 0;
}
