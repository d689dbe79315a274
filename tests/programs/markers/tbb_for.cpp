// oneTBB's parallel_for (Debian's libtbb12, which carries Intel's ITT notify client: under `fxprof record` it
// reports each parallel_for as an ITT task and names its worker threads). Runs parallel_fors of 64 short
// sleeps until a worker thread took part in one (a handshake, not a time), printing each one's times read
// around it:
//   tbb_for TRUTH_FILE   (lines "START_NS END_NS")
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

namespace {

uint64_t now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* f = fopen(argv[1], "w");
  if (!f) return 1;
  std::atomic<bool> worker{false};
  for (int round = 0; round < 1000 && !worker; ++round) {
    const uint64_t start = now();
    tbb::parallel_for(0, 64, [&](int) {
      if (tbb::this_task_arena::current_thread_index() > 0) worker = true;
      timespec ts{0, 200000};
      nanosleep(&ts, nullptr);
    });
    fprintf(f, "%llu %llu\n", static_cast<unsigned long long>(start), static_cast<unsigned long long>(now()));
  }
  fclose(f);
  printf(worker ? "done\n" : "no worker thread took part\n");
  return worker ? 0 : 1;
}
