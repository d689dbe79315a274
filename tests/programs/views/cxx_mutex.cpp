// Issue 21 item 6: C++ std::mutex contention. Three threads take one std::mutex through std::lock_guard in
// cxx_update_table, which holds it for 2 ms of spinning; the unlock is the lock_guard's destructor, inlined
// (std::mutex::unlock, __gthread_mutex_unlock) around libc's pthread_mutex_unlock: "Held by" must name
// cxx_update_table, not the wrappers. Prints "mutex 0x..." (the lock's address) on stdout.
#include <time.h>

#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace {

std::mutex table_lock;
volatile unsigned long sink;

double monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

__attribute__((noinline)) void cxx_update_table() {
  {
    std::lock_guard<std::mutex> guard(table_lock);
    const double end = monotonic_ms() + 2.0;
    unsigned long x = sink;
    while (monotonic_ms() < end)
      for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
    sink = x;
  }
  asm volatile("");  // the unlock is no tail call: cxx_update_table is on the stack that releases the lock
}

__attribute__((noinline)) void cxx_worker() {
  for (int i = 0; i < 15; ++i) cxx_update_table();
}

}  // namespace

int main() {
  std::printf("mutex %p\n", static_cast<void*>(&table_lock));
  std::fflush(stdout);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back(cxx_worker);
  for (auto& t : threads) t.join();
  return 0;
}
