// Issue 34 item 5: "Held by" names the code that held the lock, not the program's own lock wrapper. A
// leveldb-like store::port::Mutex whose Lock and Unlock are out-of-line thin wrappers of pthread_mutex_lock
// and pthread_mutex_unlock; two distinct functions (append_journal, compact_index) take it and compute ~1 ms
// of CPU time under it, from 4 threads. Holders must be those two functions (and waiters too), never
// Mutex::Unlock or Mutex::Lock. Prints "mutex 0x..." (the lock's address) on stdout.
#include <pthread.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace store::port {

class Mutex {
 public:
  __attribute__((noinline)) void Lock() {
    if (pthread_mutex_lock(&mu_) != 0) std::abort();
  }
  __attribute__((noinline)) void Unlock() {
    if (pthread_mutex_unlock(&mu_) != 0) std::abort();
  }
  const void* address() const { return &mu_; }

 private:
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;
};

}  // namespace store::port

namespace {

store::port::Mutex table_mutex;
volatile unsigned long sink;

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void spin_cpu_ms(double ms) {
  const double end = thread_cpu_ms() + ms;
  unsigned long x = sink;
  while (thread_cpu_ms() < end)
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  sink = x;
}

}  // namespace

__attribute__((noinline)) void append_journal() {
  table_mutex.Lock();
  spin_cpu_ms(1.0);
  table_mutex.Unlock();
  asm volatile("");
}

__attribute__((noinline)) void compact_index() {
  table_mutex.Lock();
  spin_cpu_ms(1.2);  // not 1.0: no identical code folding into append_journal
  table_mutex.Unlock();
  asm volatile("");
}

__attribute__((noinline)) void worker(int i, int rounds) {
  for (int r = 0; r < rounds; ++r) (i % 2 == 0 ? append_journal : compact_index)();
  asm volatile("");
}

int main() {
  std::printf("mutex %p\n", table_mutex.address());
  std::fflush(stdout);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(worker, i, 25);
  for (auto& t : threads) t.join();
  return 0;
}
