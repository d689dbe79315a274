// The program of the on-CPU share tests (issue 36): CPU-bound, each function spinning for a share of its own
// CPU time, so its shares of on-CPU samples are the same however loaded the machine.
//   exp_shares          hot_loop 80 ms, warm_loop 60 ms, cool_loop 60 ms: hot_loop is the hottest (40%)
//   exp_shares moved    hot_loop 20 ms, moved_loop 60 ms (new: 30% of the CPU), warm_loop 60, cool_loop 60
#include <time.h>

#include <cstring>

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

__attribute__((noinline)) void hot_loop(long ms) { SPIN(ms); }
__attribute__((noinline)) void moved_loop(long ms) { SPIN(ms); }
__attribute__((noinline)) void warm_loop(long ms) { SPIN(ms); }
__attribute__((noinline)) void cool_loop(long ms) { SPIN(ms); }

int main(int argc, char** argv) {
  const bool moved = argc > 1 && std::strcmp(argv[1], "moved") == 0;
  hot_loop(moved ? 20 : 80);
  if (moved) moved_loop(60);
  warm_loop(60);
  cool_loop(60);
  return 0;
}
