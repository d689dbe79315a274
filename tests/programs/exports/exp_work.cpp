// The program the export, report and diff tests profile: three functions with known CPU shares, the second
// slower by the factor given as argv[1] (default 1), and a function inlined into the third.
//   exp_work          alpha 100 ms, beta 100 ms, gamma 100 ms (of which mix_inlined 100 ms)
//   exp_work 2        beta 200 ms: its self share grows from 1/3 to 1/2
// The busy loops are written out in each function (a macro, not a call) so that self time lands in them.
#include <time.h>

#include <cstdlib>

volatile unsigned long sink;

static long cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

#define SPIN(ms)                                                                                  \
  do {                                                                                            \
    long start_ = cpu_ms();                                                                       \
    unsigned long x_ = 1;                                                                         \
    while (cpu_ms() - start_ < (ms))                                                              \
      for (int i_ = 0; i_ < 20000; ++i_) x_ = x_ * 6364136223846793005ul + 1442695040888963407ul; \
    sink = x_;                                                                                    \
  } while (0)

__attribute__((noinline)) void alpha(long ms) { SPIN(ms); }
__attribute__((noinline)) void beta(long ms) { SPIN(ms); }
__attribute__((always_inline)) inline void mix_inlined(long ms) { SPIN(ms); }
__attribute__((noinline)) void gamma_work(long ms) {
  mix_inlined(ms);
  sink = sink + 1;
}

int main(int argc, char** argv) {
  double factor = argc > 1 ? std::atof(argv[1]) : 1.0;
  alpha(100);
  beta(static_cast<long>(100 * factor));
  gamma_work(100);
  return 0;
}
