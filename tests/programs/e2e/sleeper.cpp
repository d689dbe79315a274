// A sleeper beside a busy thread (tests/e2e/view_test.cpp): the thread "e2e-busy" spins 300 ms of CPU in
// busy_spin while "e2e-sleeper" sleeps 300 ms in sleeper_nap and the main thread waits for both. In a
// wall-clock profile the sleeper and the main thread use far under 5% of the busy thread's CPU: the threads
// the Firefox Profiler hides by default.
#include <pthread.h>
#include <time.h>

#include <thread>

#include "cpu_spin.h"

namespace {
volatile int after;  // written after each call so the compiler cannot turn the calls into tail jumps
__attribute__((noinline)) void busy_spin() {
  spin_cpu_ms(300);
  after = 1;
}
__attribute__((noinline)) void sleeper_nap() {
  timespec ts{0, 300'000'000};
  nanosleep(&ts, nullptr);
  after = 2;
}
}  // namespace

int main() {
  std::thread busy([] {
    pthread_setname_np(pthread_self(), "e2e-busy");
    busy_spin();
  });
  std::thread sleeper([] {
    pthread_setname_np(pthread_self(), "e2e-sleeper");
    sleeper_nap();
  });
  busy.join();
  sleeper.join();
  return 0;
}
