// Waits that are not lock contention, and wakes that no thread made (tests/e2e/offcpu_test.cpp):
//  - a pool of 3 idle workers ("pool") waiting on one condition variable (offcpu_pool_worker);
//  - a busy thread ("busy") spinning 150 ms of CPU (offcpu_busy), and beside it a sleeper ("sleeper") doing
//    20 sleeps of 5 ms (offcpu_sleeper): each ends by its timer, an interrupt that may hit "busy";
//  - the main thread joining "busy" (offcpu_join_phase), then waking and joining the pool;
//  - run-queue delay after a wake: "late" (offcpu_late_sleeper) sleeps 10 ms on CPU 0 while "hog", a
//    SCHED_FIFO thread on CPU 0, spins 60 ms from 2 ms on: "late" is woken at 10 ms and runs at ~62 ms.
//    Logs "late_wait MS" (from the sleep's start until it ran again).
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <cstdio>

#include "wall_log.h"

namespace {

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
bool done = false;
volatile unsigned long sink;

void spin_until(double end_ms, double (*clock)()) {
  unsigned long x = 1;
  while (clock() < end_ms)
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

void on_cpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) std::fprintf(stderr, "affinity\n");
}

__attribute__((noinline)) void* offcpu_pool_worker(void*) {
  pthread_setname_np(pthread_self(), "pool");
  pthread_mutex_lock(&mu);
  while (!done) pthread_cond_wait(&cv, &mu);  // idle: no work ever comes
  pthread_mutex_unlock(&mu);
  return nullptr;
}

__attribute__((noinline)) void* offcpu_busy(void*) {
  pthread_setname_np(pthread_self(), "busy");
  spin_until(thread_cpu_ms() + 150.0, thread_cpu_ms);
  return nullptr;
}

__attribute__((noinline)) void* offcpu_sleeper(void*) {
  pthread_setname_np(pthread_self(), "sleeper");
  for (int i = 0; i < 20; ++i) sleep_ms(5);
  return nullptr;
}

__attribute__((noinline)) void* offcpu_late_sleeper(void*) {
  pthread_setname_np(pthread_self(), "late");
  on_cpu0();
  const double t0 = monotonic_ms();
  sleep_ms(10);
  ms_log("late_wait", monotonic_ms() - t0);
  return nullptr;
}

__attribute__((noinline)) void* offcpu_hog(void*) {
  pthread_setname_np(pthread_self(), "hog");
  on_cpu0();
  sched_param sp{};
  sp.sched_priority = 1;
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) std::fprintf(stderr, "SCHED_FIFO\n");
  spin_until(monotonic_ms() + 60.0, monotonic_ms);
  return nullptr;
}

__attribute__((noinline)) void offcpu_join_phase(pthread_t t) {
  const double t0 = monotonic_ms();
  pthread_join(t, nullptr);
  ms_log("join", monotonic_ms() - t0);
}

}  // namespace

int main() {
  pthread_t pool[3], busy, sleeper, late, hog;
  for (auto& t : pool) pthread_create(&t, nullptr, offcpu_pool_worker, nullptr);
  pthread_create(&busy, nullptr, offcpu_busy, nullptr);
  pthread_create(&sleeper, nullptr, offcpu_sleeper, nullptr);
  offcpu_join_phase(busy);
  pthread_join(sleeper, nullptr);

  pthread_create(&late, nullptr, offcpu_late_sleeper, nullptr);
  sleep_ms(2);  // "late" is asleep by now
  pthread_create(&hog, nullptr, offcpu_hog, nullptr);
  pthread_join(hog, nullptr);
  pthread_join(late, nullptr);

  pthread_mutex_lock(&mu);
  done = true;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (auto& t : pool) pthread_join(t, nullptr);
  return 0;
}
