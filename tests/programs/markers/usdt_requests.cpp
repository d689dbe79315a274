// USDT probes of our own (<sys/sdt.h>, systemtap-sdt-dev): `fxprof probes` lists them
// (tests/elf/usdt_test.cpp). requests N: N requests, each between fxtest:request__start(id, name) and
// fxtest:request__done(id, status); fxtest:tick (with a semaphore) only computes its argument when traced.
#include <sys/sdt.h>

#include <cstdio>
#include <cstdlib>

void usdt_tick(int id);  // usdt_tick.cpp

namespace {

long work(int id) {
  volatile long sum = 0;
  for (int i = 0; i < 100000 * (id % 5 + 1); ++i) sum = sum + i;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10;
  static const char* const kNames[] = {"index", "search", "upload"};
  for (int id = 0; id < n; ++id) {
    const char* name = kNames[id % 3];
    DTRACE_PROBE2(fxtest, request__start, id, name);
    const long r = work(id);
    const int status = r > 0 ? 200 : 500;
    DTRACE_PROBE2(fxtest, request__done, id, status);
    usdt_tick(id);
  }
  std::printf("%d requests\n", n);
  return 0;
}
