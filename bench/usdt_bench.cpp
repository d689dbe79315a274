// The cost of a USDT probe hit (bench/usdt.sh): N hits of fxbench:hit(i, "name") in a loop, timed by the
// thread's CPU clock (a uprobe's trap and BPF program run in the thread's time) and the wall clock. Not
// traced, a probe is one nop; under `fxprof record --usdt` each hit traps into the kernel.
#include <sys/sdt.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

double now(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  const char* name = "request";
  const double cpu0 = now(CLOCK_THREAD_CPUTIME_ID), wall0 = now(CLOCK_MONOTONIC);
  for (long i = 0; i < n; ++i) DTRACE_PROBE2(fxbench, hit, i, name);
  const double cpu = now(CLOCK_THREAD_CPUTIME_ID) - cpu0, wall = now(CLOCK_MONOTONIC) - wall0;
  std::printf("%ld hits: %.1f ns CPU, %.1f ns wall a hit\n", n, cpu / static_cast<double>(n),
              wall / static_cast<double>(n));
  return 0;
}
