// The plugin rec_forkexec loads with dlopen: its code must show up as a lib of that process.
#include <cstdint>
#include <ctime>

// Spins for `ms` of CPU time.
extern "C" __attribute__((noinline)) uint64_t rec_plugin_work(uint64_t ms) {
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
  };
  uint64_t end = cpu_ms() + ms;
  uint64_t x = 7;
  while (cpu_ms() < end)
    for (int i = 0; i < 100000; ++i) x = x * 2862933555777941757ull + 3037000493ull;
  return x;
}
