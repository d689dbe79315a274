// Spins 150 ms of CPU, then ends as asked: `exit N`, `segv`, `abort`, `kill`.
#include <signal.h>

#include <cstdlib>
#include <cstring>

#include "cpu_spin.h"

volatile int* volatile null_ptr = nullptr;
volatile int after;

__attribute__((noinline)) void busy_before_exit() {
  spin_cpu_ms(150);
  after = 1;
}

int main(int argc, char** argv) {
  busy_before_exit();
  cpu_log("main");
  if (argc < 2) return 0;
  if (!std::strcmp(argv[1], "exit") && argc > 2) std::exit(std::atoi(argv[2]));
  if (!std::strcmp(argv[1], "segv")) return *null_ptr;
  if (!std::strcmp(argv[1], "abort")) std::abort();
  if (!std::strcmp(argv[1], "kill")) raise(SIGKILL);
  return 0;
}
