// Busy work measured in this thread's CPU time, not wall time: sample counts then do not depend on how
// loaded the machine is (cpu-clock samples count CPU time).
#pragma once
#include <time.h>

#include "../cpu_log.h"

inline volatile unsigned long cpu_spin_sink;

__attribute__((noinline)) inline void spin_cpu_ms(long ms) {
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
  };
  long start = cpu_ms();
  unsigned long x = 1;
  while (cpu_ms() - start < ms)
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  cpu_spin_sink = x;
}
