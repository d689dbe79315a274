// Known answers for the critical path (tests/e2e/critical_path_test.cpp):
//  - `threads`: a pipeline of three threads: "cp_a" waits on cp_b's queue, "cp_b" on cp_c's, "cp_c" computes
//    300 ms of its own CPU (cp_compute, measured with the thread's CPU clock, however loaded the machine)
//    before it hands on; cp_a's critical path is cp_c's cp_compute;
//  - `process`: a "request" (the main thread) waits on a pipe to a child process that computes 300 ms of CPU
//    (cp_child_compute) and then answers; the request's path crosses into the child.
// Logs "a_wait MS" / "request_wait MS" (wall ms of the wait) and "compute MS" / "child_compute MS" (CPU ms
// computed).
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "wall_log.h"

namespace {

volatile unsigned long sink;

// `ms` of this thread's CPU time, computed.
__attribute__((noinline)) void spin_cpu(double ms) {
  const double end = thread_cpu_ms() + ms;
  unsigned long x = 1;
  while (thread_cpu_ms() < end)
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
}

__attribute__((noinline)) void cp_compute() {
  const double before = thread_cpu_ms();
  spin_cpu(300);
  ms_log("compute", thread_cpu_ms() - before);
}

// Not folded into cp_compute by the compiler (identical code folding would give both one name).
__attribute__((noinline)) void cp_child_compute() {
  const double before = thread_cpu_ms();
  spin_cpu(300);
  ms_log("child_compute", thread_cpu_ms() - before);
}

// A one-item queue.
struct Queue {
  std::mutex mu;
  std::condition_variable cv;
  bool full = false;
  void put() {
    std::lock_guard<std::mutex> g(mu);
    full = true;
    cv.notify_one();
  }
  void take() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return full; });
  }
};

Queue to_a, to_b;

void* stage_c(void*) {
  pthread_setname_np(pthread_self(), "cp_c");
  cp_compute();
  to_b.put();
  return nullptr;
}

void* stage_b(void*) {
  pthread_setname_np(pthread_self(), "cp_b");
  to_b.take();
  to_a.put();
  return nullptr;
}

void* stage_a(void*) {
  pthread_setname_np(pthread_self(), "cp_a");
  const double start = monotonic_ms();
  to_a.take();
  ms_log("a_wait", monotonic_ms() - start);
  return nullptr;
}

int threads() {
  pthread_t a, b, c;
  pthread_create(&a, nullptr, stage_a, nullptr);
  pthread_create(&b, nullptr, stage_b, nullptr);
  pthread_create(&c, nullptr, stage_c, nullptr);
  pthread_join(c, nullptr);
  pthread_join(b, nullptr);
  pthread_join(a, nullptr);
  return 0;
}

int process() {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    cp_child_compute();
    const char answer = 'x';
    _exit(write(fds[1], &answer, 1) == 1 ? 0 : 1);
  }
  close(fds[1]);
  const double start = monotonic_ms();
  char answer = 0;
  const ssize_t n = read(fds[0], &answer, 1);  // the request waits for the child's answer
  ms_log("request_wait", monotonic_ms() - start);
  int status = 0;
  waitpid(child, &status, 0);
  return n == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "process") == 0) return process();
  return threads();
}
