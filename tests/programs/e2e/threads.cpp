// Two named worker threads and a busy main thread, ~300 ms each, with distinctive function names.
#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace {
volatile unsigned long sink;

__attribute__((noinline)) void spin_for(std::chrono::milliseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  unsigned long x = 1;
  while (std::chrono::steady_clock::now() < end)
    for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
}
__attribute__((noinline)) void alpha_spin() { spin_for(std::chrono::milliseconds(300)); }
__attribute__((noinline)) void beta_spin() { spin_for(std::chrono::milliseconds(300)); }
__attribute__((noinline)) void main_spin() { spin_for(std::chrono::milliseconds(300)); }
}  // namespace

int main() {
  std::thread a([] {
    pthread_setname_np(pthread_self(), "e2e-alpha");
    alpha_spin();
  });
  std::thread b([] {
    pthread_setname_np(pthread_self(), "e2e-beta");
    beta_spin();
  });
  main_spin();
  a.join();
  b.join();
  std::puts("threads done");
  return 0;
}
