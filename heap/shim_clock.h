// The heap shim's clocks (heap/shim.cpp only): CLOCK_MONOTONIC, and the time-stamp counter where it is
// invariant, with the Clock records that let the recorder map ticks to nanoseconds (heap/wire.h).
#pragma once

#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include <cstdint>

#include "heap/wire.h"

namespace fxprof::heap::shim {

namespace wire = fxprof::heap::wire;

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Event times: the TSC where it is invariant (one clock for every CPU and process, ~25 ns a read on this
// VM against ~55 ns for clock_gettime through kvm-clock: two reads per malloc+free in full mode), else
// CLOCK_MONOTONIC. TSC chunks carry Clock records that the recorder maps the ticks through (heap/wire.h).
inline bool use_tsc = false;

inline bool invariant_tsc() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007) return false;
  __get_cpuid(0x80000007, &a, &b, &c, &d);
  return (d >> 8) & 1;
#else
  return false;
#endif
}

inline uint64_t event_time() {
#if defined(__x86_64__)
  if (use_tsc) return __rdtsc();
#endif
  return now_ns();
}

inline wire::Record clock_record() {
  wire::Record r{static_cast<uint8_t>(wire::Kind::Clock), {}, 0, 0, 0, 0};
#if defined(__x86_64__)
  uint64_t before = __rdtsc();
  r.time = now_ns();
  r.addr = before + (__rdtsc() - before) / 2;
#endif
  return r;
}

}  // namespace fxprof::heap::shim
