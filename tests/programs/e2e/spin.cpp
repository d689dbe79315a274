// Busy until SIGINT/SIGTERM (at most 60 s): the program a user stops with Ctrl+C. Logs "ready" after 100 ms
// of CPU (tests wait for it instead of sleeping) and, when the signal comes, its CPU time as "main" before
// dying of that signal (so the exit status is still 128+signal).
#include <signal.h>

#include <chrono>

#include "cpu_spin.h"

namespace {
volatile int after;
volatile sig_atomic_t stop_signal;

void on_signal(int sig) { stop_signal = sig; }

__attribute__((noinline)) void spin_until_killed() {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool ready = false;
  long spun = 0;
  while (!stop_signal && std::chrono::steady_clock::now() < end) {
    spin_cpu_ms(10);
    spun += 10;
    if (!ready && spun >= 100) {
      ready = true;
      cpu_log("ready");
    }
  }
  after = 1;
}
}  // namespace

int main() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  spin_until_killed();
  cpu_log("main");
  if (stop_signal) {
    signal(stop_signal, SIG_DFL);
    raise(stop_signal);
  }
  return 0;
}
