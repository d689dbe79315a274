// Two named worker threads and a busy main thread, 300 ms of CPU each, with distinctive function names; each
// thread logs its CPU time (cpu_log.h).
#include <pthread.h>

#include <cstdio>
#include <thread>

#include "cpu_spin.h"

namespace {
volatile int after;  // written after each call so the compiler cannot turn the calls into tail jumps
__attribute__((noinline)) void alpha_spin() {
  spin_cpu_ms(300);
  after = 1;
}
__attribute__((noinline)) void beta_spin() {
  spin_cpu_ms(300);
  after = 2;
}
__attribute__((noinline)) void main_spin() {
  spin_cpu_ms(300);
  after = 3;
}
}  // namespace

int main() {
  std::thread a([] {
    pthread_setname_np(pthread_self(), "e2e-alpha");
    alpha_spin();
    cpu_log("e2e-alpha");
  });
  std::thread b([] {
    pthread_setname_np(pthread_self(), "e2e-beta");
    beta_spin();
    cpu_log("e2e-beta");
  });
  main_spin();
  cpu_log("main");
  a.join();
  b.join();
  std::puts("threads done");
  return 0;
}
