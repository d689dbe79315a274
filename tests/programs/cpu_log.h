// What the test programs tell the tests: how much CPU each thread used, so that a test expects
// samples = CPU time x frequency (the cpu-clock event samples CPU time, so this holds however loaded the
// machine is), and when a program is ready (a test waits for that instead of sleeping).
//
// FXPROF_TEST_CPU_LOG=FILE in the environment: cpu_log() appends "LABEL MS\n" with one O_APPEND write, so
// lines of concurrent threads and processes never interleave. Without the variable nothing is written.
// async-signal-safe apart from the formatting, which uses no locale and no allocation.
#pragma once
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

inline double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Appends "LABEL MS" (MS: the calling thread's CPU time in whole microseconds / 1000).
inline void cpu_log(const char* label) {
  const char* path = std::getenv("FXPROF_TEST_CPU_LOG");
  if (!path || !*path) return;
  char line[160];
  size_t n = std::strlen(label);
  if (n > 100) n = 100;
  std::memcpy(line, label, n);
  line[n++] = ' ';
  auto us = static_cast<unsigned long long>(thread_cpu_ms() * 1000.0);
  char digits[24];
  int d = 0;
  do {
    digits[d++] = static_cast<char>('0' + us % 10);
    us /= 10;
  } while (us);
  while (d < 4) digits[d++] = '0';  // at least "0.000"
  for (int i = d - 1; i >= 3; --i) line[n++] = digits[i];
  line[n++] = '.';
  for (int i = 2; i >= 0; --i) line[n++] = digits[i];
  line[n++] = '\n';
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return;
  ssize_t w = write(fd, line, n);
  (void)w;
  close(fd);
}
