// Unwinding benchmark: records real stacks of a real program once (cpu-clock, 32 KiB stack copies, the same
// perf path the tests use), then unwinds them again and again on one core and prints stacks per second (cold:
// fresh Unwinder, modules loaded and rules evaluated; warm: the rule cache filled), plus completeness.
//   fxprof_unwind_bench [--freq HZ] [--rounds N] [--] PROGRAM [ARGS...]
// Default program: /usr/bin/python3 running recursive code (libpython, -O2, no frame pointers, deep stacks).
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "recorder/unwind/unwinder.h"
#include "tests/recorder/unwind/capture.h"

using fxprof::recorder::UnwindEnd;
using fxprof::recorder::Unwinder;
using fxprof::unwind_test::Record;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  double hz = 4000;
  int rounds = 200;
  std::vector<std::string> cmd;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--freq" && i + 1 < argc) {
      hz = std::atof(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--") {
      for (++i; i < argc; ++i) cmd.push_back(argv[i]);
    } else {
      for (; i < argc; ++i) cmd.push_back(argv[i]);
    }
  }
  if (cmd.empty())
    cmd = {"/usr/bin/python3", "-c",
           "import json\n"
           "def f(n):\n  return f(n - 1) + 1 if n else len(json.dumps([list(range(50))] * 40))\n"
           "s = 0\nfor i in range(6000): s += f(40)\n"};

  // One core, so the figure is per core.
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);

  auto cap = fxprof::unwind_test::capture_command(cmd, {hz, 32768});
  if (!cap.ok()) {
    std::fprintf(stderr, "fxprof_unwind_bench: %s\n", cap.error().c_str());
    return 1;
  }
  const auto& records = cap->records;
  size_t samples = cap->samples();
  if (samples < 100) {
    std::fprintf(stderr, "fxprof_unwind_bench: only %zu samples recorded (lost %llu)\n", samples,
                 static_cast<unsigned long long>(cap->lost));
    return 1;
  }

  // Cold: a fresh Unwinder (opens and indexes binaries, evaluates every rule once).
  auto t0 = std::chrono::steady_clock::now();
  Unwinder cold;
  fxprof::unwind_test::replay(*cap, cold, [](const Record&, const auto&, auto) {});
  double cold_s = seconds_since(t0);

  // Warm: the same Unwinder, samples only (what a long recording does once its rules are cached).
  std::vector<const Record*> sample_recs;
  for (const Record& r : records)
    if (r.kind == Record::Sample) sample_recs.push_back(&r);
  std::vector<uint64_t> frames(1024);
  uint64_t frames_total = 0;
  t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < rounds; ++round)
    for (const Record* r : sample_recs) frames_total += cold.unwind(r->pid, r->regs, r->stack, frames).count;
  double warm_s = seconds_since(t0);

  const auto& st = cold.stats();
  double stacks = static_cast<double>(samples) * rounds;
  double per_round = static_cast<double>(samples);
  std::printf("unwind bench: %s (%zu samples at %.0f Hz, %llu lost, 32 KiB stack copies)\n", cmd[0].c_str(),
              samples, hz, static_cast<unsigned long long>(cap->lost));
  std::printf("  complete %.1f %%, truncated %.1f %%, failed %.1f %%, mean depth %.1f frames\n",
              100.0 * static_cast<double>(st.complete) / static_cast<double>(st.stacks),
              100.0 * static_cast<double>(st.truncated) / static_cast<double>(st.stacks),
              100.0 * static_cast<double>(st.failed) / static_cast<double>(st.stacks),
              static_cast<double>(frames_total) / stacks);
  std::printf("  cold: %.0f stacks/s (%.2f ms for the first pass, %llu modules, %llu rules evaluated)\n",
              per_round / cold_s, cold_s * 1e3, static_cast<unsigned long long>(st.modules),
              static_cast<unsigned long long>(st.cache_misses));
  std::printf("  warm: %.0f stacks/s on one core (%.3f us/stack, %.1f M frames/s), target >= 200000\n",
              stacks / warm_s, warm_s / stacks * 1e6, static_cast<double>(frames_total) / warm_s / 1e6);
  std::printf(
      "  rule cache: %.2f %% hits over all passes, %llu frames by frame pointers\n",
      100.0 * static_cast<double>(st.cache_hits) / static_cast<double>(st.cache_hits + st.cache_misses),
      static_cast<unsigned long long>(st.fp_frames));
  return 0;
}
