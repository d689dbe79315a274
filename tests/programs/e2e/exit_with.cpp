// Spins ~150 ms, then ends as asked: `exit N`, `segv`, `abort`, `kill`.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

volatile int* volatile null_ptr = nullptr;
volatile unsigned long sink;

__attribute__((noinline)) void busy_before_exit() {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  unsigned long x = 1;
  while (std::chrono::steady_clock::now() < end)
    for (int i = 0; i < 10000; ++i) x = x * 2862933555777941757ul + 3037000493ul;
  sink = x;
}

int main(int argc, char** argv) {
  busy_before_exit();
  if (argc < 2) return 0;
  if (!std::strcmp(argv[1], "exit") && argc > 2) std::exit(std::atoi(argv[2]));
  if (!std::strcmp(argv[1], "segv")) return *null_ptr;
  if (!std::strcmp(argv[1], "abort")) std::abort();
  if (!std::strcmp(argv[1], "kill")) raise(SIGKILL);
  return 0;
}
