// USDT probes of our own (<sys/sdt.h>, systemtap-sdt-dev): `fxprof probes` lists them
// (tests/elf/usdt_test.cpp). requests N: N requests, each between fxtest:request__start(id, name) and
// fxtest:request__done(id, status); fxtest:tick (with a semaphore) only computes its argument when traced.
// requests N TRUTH: also writes "TID S0 S1 E0 E1 STATUS" per request to TRUTH: CLOCK_MONOTONIC read just
// before and just after its start probe (S0, S1) and its done probe (E0, E1): tests/e2e/usdt_test.cpp
// compares `record --usdt`'s markers with them (a preemption next to a probe widens its bracket only).
#include <sys/sdt.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

void usdt_tick(int id);  // usdt_tick.cpp

namespace {

unsigned long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull +
         static_cast<unsigned long long>(ts.tv_nsec);
}

long work(int id) {
  volatile long sum = 0;
  for (int i = 0; i < 100000 * (id % 5 + 1); ++i) sum = sum + i;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10;
  FILE* truth = argc > 2 ? std::fopen(argv[2], "w") : nullptr;
  static const char* const kNames[] = {"index", "search", "upload"};
  for (int id = 0; id < n; ++id) {
    const char* name = kNames[id % 3];
    const unsigned long long s0 = now_ns();
    DTRACE_PROBE2(fxtest, request__start, id, name);
    const unsigned long long s1 = now_ns();
    const long r = work(id);
    const int status = r > 0 ? 200 + id : 500;
    const unsigned long long e0 = now_ns();
    DTRACE_PROBE2(fxtest, request__done, id, status);
    const unsigned long long e1 = now_ns();
    if (truth)
      std::fprintf(truth, "%ld %llu %llu %llu %llu %d\n", static_cast<long>(gettid()), s0, s1, e0, e1,
                   status);
    usdt_tick(id);
  }
  if (truth) std::fclose(truth);
  std::printf("%d requests\n", n);
  return 0;
}
