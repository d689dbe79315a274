// Known answer for the critical path through a lock holder (tests/e2e/critical_path_test.cpp): eight pool
// workers; "pool_w0" takes the lock and sleeps 250 ms holding it (pool_hold_sleep), the seven others
// ("pool_w1".."pool_w7") are let go once it holds it and wait for the lock, each handing it on. The waiters'
// critical paths go back through the lock's hand-overs to the holder's sleep.
// Logs "hold_sleep MS" (wall ms the holder slept) and "wait_N MS" (wall ms worker N waited for the lock).
#include <pthread.h>
#include <time.h>

#include <cstdio>
#include <mutex>

#include "wall_log.h"

namespace {

std::mutex lock;
bool held = false;
pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
pthread_mutex_t held_pm = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void pool_hold_sleep() {
  const double start = monotonic_ms();
  timespec ts{0, 250'000'000};
  while (nanosleep(&ts, &ts) != 0) {
  }
  ms_log("hold_sleep", monotonic_ms() - start);
}

void* worker(void* arg) {
  const long n = reinterpret_cast<long>(arg);
  char name[16];
  std::snprintf(name, sizeof name, "pool_w%ld", n);
  pthread_setname_np(pthread_self(), name);
  if (n == 0) {
    std::lock_guard<std::mutex> g(lock);
    pthread_mutex_lock(&held_pm);
    held = true;
    pthread_cond_broadcast(&held_cv);
    pthread_mutex_unlock(&held_pm);
    pool_hold_sleep();
    return nullptr;
  }
  pthread_mutex_lock(&held_pm);
  while (!held) pthread_cond_wait(&held_cv, &held_pm);
  pthread_mutex_unlock(&held_pm);
  const double start = monotonic_ms();
  {
    std::lock_guard<std::mutex> g(lock);
    char label[16];
    std::snprintf(label, sizeof label, "wait_%ld", n);
    ms_log(label, monotonic_ms() - start);
  }
  return nullptr;
}

}  // namespace

int main() {
  pthread_t t[8];
  for (long i = 0; i < 8; ++i) pthread_create(&t[i], nullptr, worker, reinterpret_cast<void*>(i));
  for (pthread_t& th : t) pthread_join(th, nullptr);
  return 0;
}
