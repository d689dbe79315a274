// Built without .eh_frame entries (-fno-asynchronous-unwind-tables): unwound from .debug_frame (built -g, in
// the binary or a separate debug file) or, built with frame pointers and no -g, by the frame-pointer
// fallback.
//   main -> nocfi_outer -> nocfi_mid -> nocfi_leaf (spins for MS milliseconds of CPU time)
#include <cstdint>
#include <cstdlib>
#include <ctime>

extern "C" {
volatile uint64_t g_nocfi_sink;

__attribute__((noinline)) double nocfi_now_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) uint64_t nocfi_leaf(double until) {
  uint64_t x = 1;
  while (nocfi_now_ms() < until)
    for (int i = 0; i < 20000; ++i) x = x * 2862933555777941757ull + 3037000493ull;
  return x;
}

__attribute__((noinline)) uint64_t nocfi_mid(double until) {
  uint64_t r = nocfi_leaf(until);
  g_nocfi_sink = r;
  return r + 1;
}

__attribute__((noinline)) uint64_t nocfi_outer(double until) {
  uint64_t r = nocfi_mid(until);
  g_nocfi_sink = r;
  return r + 2;
}
}

int main(int argc, char** argv) {
  double ms = argc > 1 ? std::atof(argv[1]) : 100;
  g_nocfi_sink = nocfi_outer(nocfi_now_ms() + ms);
  return 0;
}
