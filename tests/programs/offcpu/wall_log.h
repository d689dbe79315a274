// The off-CPU test programs log what they measured themselves (wall milliseconds of a wait, CPU milliseconds
// of a spin) as "LABEL MS" lines into FXPROF_TEST_CPU_LOG, the file cpu_log.h writes (one O_APPEND write per
// line), so the tests read them with test::CpuLog.
#pragma once
#include <time.h>

#include <cstdio>

#include "../cpu_log.h"

inline double monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Appends "LABEL MS" (MS with 3 decimals).
inline void ms_log(const char* label, double ms) {
  const char* path = std::getenv("FXPROF_TEST_CPU_LOG");
  if (!path || !*path) return;
  char line[160];
  int n = std::snprintf(line, sizeof line, "%s %.3f\n", label, ms);
  if (n <= 0 || n >= static_cast<int>(sizeof line)) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return;
  ssize_t w = write(fd, line, static_cast<size_t>(n));
  (void)w;
  close(fd);
}
