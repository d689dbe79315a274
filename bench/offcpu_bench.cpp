// Off-CPU benchmark program (bench/offcpu.sh): two threads pass a byte back and forth through two pipes
// ROUNDS times (default 100000), so each blocks in read() once per round: ~2 context switches per round;
// WORK_US (default 0) of CPU work per thread per round lowers the rate; WORK_ITERS instead of it (the third
// argument) is a fixed amount of work per round (a CPU-bound program whose elapsed time shows overhead).
// A fourth argument `futex` passes the turn through a futex word instead (FUTEX_WAIT/FUTEX_WAKE, as a mutex
// or condition variable does): every wake is then a futex system call, whose waker's stack fxprof's eBPF
// waker tracer copies (recorder/waker.h). Prints "elapsed_ms switches_per_s" measured in the program, then
// its CPU time and the kernel's part of it (ms, both threads): the cost of a profiler's context-switch
// samples is kernel time in the program's own context, less noisy than elapsed time on a shared machine.
#include <linux/futex.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
int ping[2], pong[2];
long rounds = 100000;
double work_us = 0;
long work_iters = 0;
volatile unsigned long sink;
bool use_futex = false;
std::atomic<int> turn{0};  // futex mode: 0 the main thread's turn, 1 the ponger's

// Futex mode: wait until it is `me`'s turn; give the turn to the other and wake it.
void futex_wait_turn(int me) {
  while (turn.load(std::memory_order_acquire) != me)
    syscall(SYS_futex, reinterpret_cast<int*>(&turn), FUTEX_WAIT_PRIVATE, 1 - me, nullptr, nullptr, 0);
}
__attribute__((noinline)) void futex_pass_turn(int to) {
  turn.store(to, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<int*>(&turn), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

__attribute__((noinline)) void work() {
  if (work_iters > 0) {  // a fixed amount of CPU work: its elapsed time grows with any overhead
    unsigned long x = 1;
    for (long i = 0; i < work_iters; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
    sink = x;
    return;
  }
  if (work_us <= 0) return;
  const double end = now_ms() + work_us / 1e3;
  unsigned long x = 1;
  while (now_ms() < end)
    for (int i = 0; i < 100; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
}

__attribute__((noinline)) void* ponger(void*) {
  char c;
  for (long i = 0; i < rounds; ++i) {
    if (use_futex) {
      futex_wait_turn(1);
      work();
      futex_pass_turn(0);
      continue;
    }
    if (read(ping[0], &c, 1) != 1) std::exit(1);
    work();
    if (write(pong[1], &c, 1) != 1) std::exit(1);
  }
  return nullptr;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) rounds = std::atol(argv[1]);
  if (argc > 2) work_us = std::atof(argv[2]);
  if (argc > 3) work_iters = std::atol(argv[3]);
  if (argc > 4) use_futex = std::strcmp(argv[4], "futex") == 0;
  if (pipe(ping) != 0 || pipe(pong) != 0) return 1;
  pthread_t t;
  pthread_create(&t, nullptr, ponger, nullptr);
  const double t0 = now_ms();
  char c = 'x';
  for (long i = 0; i < rounds; ++i) {
    work();
    if (use_futex) {
      futex_pass_turn(1);
      futex_wait_turn(0);
      continue;
    }
    if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) return 1;
  }
  const double ms = now_ms() - t0;
  pthread_join(t, nullptr);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv_ms = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
  };
  std::printf("%.1f %.0f %.1f %.1f\n", ms, 2.0 * static_cast<double>(rounds) / (ms / 1e3),
              tv_ms(ru.ru_utime) + tv_ms(ru.ru_stime), tv_ms(ru.ru_stime));
  return 0;
}
