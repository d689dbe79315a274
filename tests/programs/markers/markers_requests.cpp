// 100 "requests" of 2-20 ms on a worker thread, each an interval marker "request" (category "http", fields id
// and path) whose times the program reads itself and prints as the truth; inside each, a nested
// FXPROF_SCOPE("compute") that spins (on-CPU, request_compute) and a wait (off-CPU, request_wait), and a "db"
// instant marker; between requests 1 ms of work outside any marker (between_requests).
//   markers_requests TRUTH_FILE   (lines "TID START_NS END_NS")
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "fxprof/markers.h"

namespace {

volatile uint64_t sink;

// Inlined into each caller, so that the samples' leaf is the caller (a call would be a tail call: the caller
// would leave no frame).
__attribute__((always_inline)) inline void spin_until(uint64_t until) {
  uint64_t x = 1;
  while (fxprof_now() < until)
    for (int i = 0; i < 100; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink = x;
}

__attribute__((noinline)) void request_compute(uint64_t ns) { spin_until(fxprof_now() + ns); }

__attribute__((noinline)) void request_wait(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000u), static_cast<long>(ns % 1000000000u)};
  nanosleep(&ts, nullptr);
}

__attribute__((noinline)) void between_requests() { spin_until(fxprof_now() + 1000000); }

struct Truth {
  uint64_t start, end;
};

void serve(std::vector<Truth>& truth, long& tid) {
  tid = syscall(SYS_gettid);
  for (int i = 0; i < 100; ++i) {
    const uint64_t ms = 2 + static_cast<uint64_t>(i * 7919 % 19);  // 2..20 ms
    const uint64_t start = fxprof_now();
    {
      FXPROF_SCOPE_NAMED(compute, "compute", "cpu");
      compute.field("request", i);
      request_compute(ms * 600000);  // 60% on-CPU
    }
    fxprof_field db[] = {fxprof_num("rows", i % 7), fxprof_str("table", "users")};
    fxprof_mark_instant("db", "db", db, 2);
    // The rest waiting, to the request's end.
    const uint64_t until = start + ms * 1000000;
    const uint64_t now = fxprof_now();
    if (now < until) request_wait(until - now);
    const uint64_t end = fxprof_now();
    fxprof_field fields[] = {fxprof_num("id", i), fxprof_str("path", "/item")};
    fxprof_mark_interval("http", "request", start, end, fields, 2);
    truth.push_back({start, end});
    between_requests();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: markers_requests TRUTH_FILE\n");
    return 2;
  }
  std::vector<Truth> truth;
  long tid = 0;
  std::thread worker(serve, std::ref(truth), std::ref(tid));
  worker.join();
  FILE* f = std::fopen(argv[1], "w");
  if (!f) return 1;
  for (const Truth& t : truth)
    std::fprintf(f, "%ld %llu %llu\n", tid, static_cast<unsigned long long>(t.start),
                 static_cast<unsigned long long>(t.end));
  return std::fclose(f) == 0 ? 0 : 1;
}
