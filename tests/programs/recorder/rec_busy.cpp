// Recorder test program: `rec_busy MODE [MS] [THREADS]`.
//   spin      burn CPU in rec_busy_spin for MS ms of CPU time on THREADS threads (the extra ones named
//   "spinner-N") syscalls  make cheap system calls in rec_syscall_loop for MS ms (kernel frames) exit3 spin
//   MS ms, then exit(3) segv      spin MS ms, then dereference null abort     spin MS ms, then abort()
//   sigkill   spin MS ms, then SIGKILL itself
//   exec      spin MS ms, then exec itself as `rec_busy spin MS`
//   deep      spin MS ms at the bottom of a 200-deep recursion (~120 KiB of stack)
//   sleep     sleep MS ms (SIGTERM/SIGINT end it with the default action)
// Each spinning thread logs its CPU time as "main" or "spinner-N" when done (cpu_log.h); in spin mode the
// main thread logs "ready" once the workers exist and it has spun 50 ms (attach tests wait for it).
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "../cpu_log.h"

namespace {

volatile uint64_t g_sink;

// CPU time of the calling thread: "spin 300" means 300 ms on a CPU however loaded the machine is, so sample
// counts stay predictable (~1 per ms at 1 kHz).
uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

__attribute__((noinline)) void rec_busy_spin(uint64_t ms) {
  uint64_t end = now_ms() + ms;
  uint64_t x = 1;
  while (now_ms() < end)
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

__attribute__((noinline)) void rec_syscall_loop(uint64_t ms) {
  uint64_t end = now_ms() + ms;
  char buf[256] = {};
  FILE* f = std::fopen("/dev/null", "w");
  int fd = f ? fileno(f) : 1;
  while (now_ms() < end)
    for (int i = 0; i < 100; ++i) {
      ssize_t n = write(fd, buf, sizeof buf);
      (void)n;
      syscall(SYS_getppid);
    }
  if (f) std::fclose(f);
}

// 200 frames of ~600 bytes (~120 KiB of stack, more than any DWARF stack copy), spinning at the bottom.
__attribute__((noinline)) uint64_t rec_deep_recurse(int depth, uint64_t ms) {
  volatile char pad[512];
  pad[0] = static_cast<char>(depth);
  if (depth == 0) {
    rec_busy_spin(ms);
    return static_cast<uint64_t>(pad[0]);
  }
  uint64_t r = rec_deep_recurse(depth - 1, ms) + static_cast<uint64_t>(pad[0]);
  asm volatile("" ::: "memory");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "spin";
  uint64_t ms = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 300;
  int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  if (mode == "syscalls") {
    rec_syscall_loop(ms);
    cpu_log("main");
    return 0;
  }
  if (mode == "exec") {  // spin, then become `rec_busy spin MS` (same pid, new image)
    rec_busy_spin(ms);
    cpu_log("before-exec");
    std::string arg = std::to_string(ms);
    execl("/proc/self/exe", "rec_busy", "spin", arg.c_str(), static_cast<char*>(nullptr));
    return 127;
  }
  if (mode == "deep") {
    g_sink = rec_deep_recurse(200, ms);
    cpu_log("main");
    return 0;
  }
  if (mode == "sleep") {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return 0;
  }
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t)
    workers.emplace_back([t, ms] {
      std::string name = "spinner-" + std::to_string(t);
      pthread_setname_np(pthread_self(), name.c_str());
      rec_busy_spin(ms);
      cpu_log(name.c_str());
    });
  if (ms > 50) {
    rec_busy_spin(50);
    cpu_log("ready");
    rec_busy_spin(ms - 50);
  } else {
    rec_busy_spin(ms);
  }
  cpu_log("main");
  for (auto& w : workers) w.join();
  if (mode == "exit3") std::exit(3);
  if (mode == "segv") {
    volatile int* p = nullptr;
    *p = 1;
  }
  if (mode == "abort") std::abort();
  if (mode == "sigkill") raise(SIGKILL);
  return 0;
}
