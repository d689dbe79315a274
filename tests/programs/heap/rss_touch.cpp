// RSS test program (tests/heap/rss_test.cpp): touches MIB mebibytes (every page of one malloc'd block),
// keeps them resident for HOLD_MS of wall-clock time by reading them over and over (the workload the 10 ms
// RSS sampler must see; nothing waits on it), then frees them, sleeps AFTER_MS (default 0) and exits.
//   rss_touch MIB HOLD_MS [AFTER_MS]
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace {
double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: rss_touch MIB HOLD_MS [AFTER_MS]\n");
    return 2;
  }
  const size_t bytes = static_cast<size_t>(atol(argv[1])) << 20;
  const double hold_ms = atof(argv[2]);
  // malloc (glibc maps a block this large on its own and unmaps it at free): the heap counter of --heap
  // sees the same block the RSS counter does.
  auto* p = static_cast<volatile char*>(std::malloc(bytes));
  if (p == nullptr) return 1;
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  unsigned sum = 0;
  const double until = now_ms() + hold_ms;
  while (now_ms() < until)
    for (size_t i = 0; i < bytes; i += 4096) sum += static_cast<unsigned>(p[i]);
  std::free(const_cast<char*>(p));
  if (argc == 4) {
    const double after_ms = atof(argv[3]);
    timespec ts{static_cast<time_t>(after_ms / 1000), static_cast<long>(std::fmod(after_ms, 1000.0) * 1e6)};
    nanosleep(&ts, nullptr);
  }
  return sum == 0 ? 1 : 0;
}
