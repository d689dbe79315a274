// Issue 38 item 6: "Held by" when the unlock is a tail call. tail_update_table ends in pthread_mutex_unlock,
// which GCC -O2 compiles to a `jmp`: at the unlock's futex wake its frame is gone, and the stack holds the
// return address into tail_locker: "Held by" must still name tail_update_table. Prints "mutex 0x..." (the
// lock's address) on stdout.
#include <pthread.h>
#include <time.h>

#include <cstdio>
#include <thread>
#include <vector>

namespace {

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
volatile unsigned long sink;

double monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

__attribute__((noinline)) static void tail_update_table() {
  pthread_mutex_lock(&table_lock);
  const double end = monotonic_ms() + 2.0;
  unsigned long x = sink;
  while (monotonic_ms() < end)
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
  pthread_mutex_unlock(&table_lock);  // the last call: a tail call (jmp) at -O2
}

__attribute__((noinline)) static void tail_locker(int rounds) {
  for (int i = 0; i < rounds; ++i) tail_update_table();
  asm volatile("");
}

int main() {
  std::printf("mutex %p\n", static_cast<void*>(&table_lock));
  std::fflush(stdout);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back(tail_locker, 15);
  for (auto& t : threads) t.join();
  return 0;
}
