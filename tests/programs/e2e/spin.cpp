// Busy until killed (at most 60 s): the program a user stops with Ctrl+C.
#include <chrono>

#include "cpu_spin.h"

volatile int after;

__attribute__((noinline)) void spin_until_killed() {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < end) spin_cpu_ms(10);
  after = 1;
}

int main() {
  spin_until_killed();
  return 0;
}
