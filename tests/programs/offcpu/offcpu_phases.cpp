// Off-CPU test program: the main thread sleeps 200 ms in nanosleep (offcpu_sleep_phase), reads a pipe that a
// child process writes 300 ms after it starts (offcpu_pipe_phase), then spins 300 ms of CPU
// (offcpu_spin_phase). It logs what it measured: "sleep" and "pipe" wall ms of the nanosleep and of the
// read, "spin" CPU ms of the spin. Exits with argv[1] (default 0). With argv[1] "asleep": logs "ready" and
// sleeps 60 s (a program to attach to while it waits).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "../e2e/cpu_spin.h"
#include "wall_log.h"

namespace {

__attribute__((noinline)) void offcpu_sleep_phase() {
  timespec ts{0, 200 * 1000 * 1000};
  double t0 = monotonic_ms();
  while (nanosleep(&ts, &ts) != 0) {
  }
  ms_log("sleep", monotonic_ms() - t0);
}

__attribute__((noinline)) void offcpu_pipe_phase() {
  int fds[2];
  if (pipe(fds) != 0) std::exit(90);
  pid_t child = fork();
  if (child < 0) std::exit(91);
  if (child == 0) {
    close(fds[0]);
    timespec ts{0, 300 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
    char c = 'x';
    ssize_t w = write(fds[1], &c, 1);
    _exit(w == 1 ? 0 : 1);
  }
  close(fds[1]);
  char c = 0;
  double t0 = monotonic_ms();
  ssize_t r = read(fds[0], &c, 1);
  ms_log("pipe", monotonic_ms() - t0);
  if (r != 1) std::exit(92);
  close(fds[0]);
  int st = 0;
  waitpid(child, &st, 0);
}

__attribute__((noinline)) void offcpu_spin_phase() {
  double c0 = thread_cpu_ms();
  spin_cpu_ms(300);
  ms_log("spin", thread_cpu_ms() - c0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "asleep") == 0) {
    cpu_log("ready");
    timespec ts{60, 0};
    nanosleep(&ts, nullptr);
    return 0;
  }
  offcpu_sleep_phase();
  offcpu_pipe_phase();
  offcpu_spin_phase();
  return argc > 1 ? std::atoi(argv[1]) : 0;
}
