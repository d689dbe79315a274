// Lock contention test program: 4 threads take one pthread_mutex_t 20 times each in offcpu_hold_lock, which
// holds it for 2 ms of spinning and releases it (so the holder that wakes a waiter is offcpu_hold_lock).
// Prints "mutex 0x..." (the lock's address) on stdout and logs each thread's measured time waiting in
// pthread_mutex_lock as "wait MS" (wall ms, summed over its 20 locks). Each call of pthread_mutex_lock is
// also a "lock call" interval marker (include/fxprof/markers.h, written after the unlock), so the test can
// check that the recorded off-CPU time covers it however the machine scheduled the threads.
#include <pthread.h>

#include <cstdio>

#include "fxprof/markers.h"
#include "wall_log.h"

namespace {

pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
pthread_barrier_t start;  // all four exist before any takes the lock: they contend however loaded the machine
volatile unsigned long sink;

// Returns the ms it waited for the lock.
__attribute__((noinline)) double offcpu_hold_lock() {
  const uint64_t t0 = fxprof_now();
  pthread_mutex_lock(&lock);
  const uint64_t t1 = fxprof_now();
  const double waited = static_cast<double>(t1 - t0) / 1e6;
  double end = monotonic_ms() + 2.0;
  unsigned long x = 1;
  while (monotonic_ms() < end)
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
  pthread_mutex_unlock(&lock);  // not a tail call: `waited` is returned after it
  fxprof_mark_interval("lock", "lock call", t0, t1, nullptr, 0);
  asm volatile("");
  return waited;
}

__attribute__((noinline)) void* offcpu_contender(void*) {
  pthread_barrier_wait(&start);
  double waited = 0;
  for (int i = 0; i < 20; ++i) waited += offcpu_hold_lock();
  ms_log("wait", waited);
  return nullptr;
}

}  // namespace

int main() {
  std::printf("mutex %p\n", static_cast<void*>(&lock));
  std::fflush(stdout);
  pthread_t t[4];
  pthread_barrier_init(&start, nullptr, 4);
  for (auto& th : t) pthread_create(&th, nullptr, offcpu_contender, nullptr);
  for (auto& th : t) pthread_join(th, nullptr);
  return 0;
}
