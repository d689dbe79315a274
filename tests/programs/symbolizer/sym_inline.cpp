// Symbolizer test program: known inlined helpers, templates and namespaces. The "LINE:" markers are read by
// tests/symbolizer/lookup_test.cpp to know which source lines to expect.
#include <cstdio>
#include <cstdlib>

namespace outer {
namespace inner {
template <typename T>
struct Box {
  T v;
  __attribute__((noinline)) T twice(T x) const;
};
template <typename T>
T Box<T>::twice(T x) const {
  asm volatile("");
  return v * x + 2;
}
}  // namespace inner

template <typename A, typename B>
__attribute__((noinline)) A combine(A a, const B& b) {
  asm volatile("");
  return a + static_cast<A>(b.twice(3));
}
}  // namespace outer

static inline __attribute__((always_inline)) int leaf_helper(int x) {  // LINE:leaf_begin
  int r = x * 3 + 1;
  asm volatile("" : "+r"(r));
  r ^= (x >> 2);
  asm volatile("" : "+r"(r));
  return r;  // LINE:leaf_end
}

static inline __attribute__((always_inline)) int mid_helper(int x) {
  int s = 0;
  for (int i = 0; i < x % 7; ++i) s += leaf_helper(x + i);  // LINE:call_leaf
  return s;
}

__attribute__((noinline)) int compute_hot(int x) {
  int t = mid_helper(x);  // LINE:call_mid
  asm volatile("" : "+r"(t));
  return t + 1;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 5;
  long total = 0;
  for (int i = 0; i < n; ++i) total += compute_hot(i);
  outer::inner::Box<int> box{argc};
  total += outer::combine<long, outer::inner::Box<int>>(total, box);
  std::printf("%ld\n", total);
  return 0;
}
