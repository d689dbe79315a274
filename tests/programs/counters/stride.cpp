// counters_stride BYTES PASSES: walks an array of BYTES one cache line (64 bytes) at a time, PASSES times, in
// stride_walk. Larger than the last-level cache, every access misses; within D1, almost none do.
#include <cstdio>
#include <cstdlib>
#include <vector>

__attribute__((noinline)) long stride_walk(const std::vector<char>& a, long passes) {
  long sum = 0;
  for (long p = 0; p < passes; ++p)
    for (size_t i = 0; i < a.size(); i += 64) sum += a[i];
  return sum;
}

int main(int argc, char** argv) {
  const long bytes = argc > 1 ? std::atol(argv[1]) : 1 << 20;
  const long passes = argc > 2 ? std::atol(argv[2]) : 1;
  std::vector<char> a(static_cast<size_t>(bytes), 1);
  std::printf("%ld\n", stride_walk(a, passes));
  return 0;
}
