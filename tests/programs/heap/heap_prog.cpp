// Heap test program with known numbers (tests/heap/heap_test.cpp checks them through fxprof's profiles):
//   heap_prog leak N SIZE        leak_blocks() leaks exactly N blocks of SIZE bytes; churn() makes 1000
//                                temporary 64-byte blocks; peak_phase() holds 100 x 10000 bytes at once.
//   heap_prog threads            8 threads allocate 1000 blocks of 256 bytes each, hand them to the next
//                                thread, which frees them; each thread also leaks 10 blocks of 1000 bytes.
//   heap_prog forkexec N SIZE    fork; the child execs `heap_prog leak N SIZE`; the parent leaks 3 x 333.
//   heap_prog signal             a timer signal whose handler allocates and frees (150 times) while main
//                                allocates.
//   heap_prog peak               peak_blocks() holds 200 x 5000 bytes at once (the program's peak: exactly
//                                1,000,000 bytes above what the runtime holds), frees them; small_phase()
//                                holds 100 x 3000, frees them; leak_small() leaks 7 x 2222. Nothing else.
//   heap_prog dlopen LIB N       N times: dlopen LIB, call its dl_alloc() (leaks one 4444-byte block, makes
//                                10 temporary 96-byte ones), dlclose; then leaks 3 x 1234 itself.
//   heap_prog first N            N threads, one after the other, each leaks one 64-byte block in
//                                first_block() as its only allocation.
//   heap_prog churn N            churn(N) only: N temporary 64-byte blocks.
//   heap_prog gap MS             leaks 7777 bytes, sleeps MS milliseconds, leaks 8888 bytes; prints
//                                "gap_ms G", G the CLOCK_MONOTONIC time between the two calls.
//   heap_prog estimate           sampled mode's known figures: hold_blocks() holds 3000 x 1200 bytes at once
//                                and replaces each 10 times (a plateau at the peak, 3,600,000 bytes), frees
//                                them; churn_small() makes 20000 temporary 100-byte blocks; leak_blocks()
//                                leaks 1000 x 1000 bytes.
//   heap_prog spread N           N 96-byte blocks, a 130 MiB one from the heap, N more 96-byte ones (in
//   another
//                                128 MiB turn of the sampled bitmap), held at once, freed in a scrambled
//                                order: nothing leaks.
//   heap_prog fork               fork without exec: the child leaks 5 x 4321 and makes 100 temporary 55-byte
//                                blocks, then _exit(0)s; the parent waits for it and leaks 3 x 1234.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

void* volatile g_sink;

extern "C" __attribute__((noinline)) void leak_blocks(int n, size_t size) {
  for (int i = 0; i < n; ++i) {
    void* p = malloc(size);
    memset(p, 1, size);
    g_sink = p;  // leaked on purpose
  }
}

extern "C" __attribute__((noinline)) void churn(int n) {
  for (int i = 0; i < n; ++i) {
    void* p = malloc(64);
    g_sink = p;
    free(p);
  }
}

extern "C" __attribute__((noinline)) void peak_phase() {
  void* blocks[100];
  for (auto& b : blocks) {
    b = malloc(10000);
    g_sink = b;
  }
  for (auto& b : blocks) free(b);
}

extern "C" __attribute__((noinline)) void peak_blocks() {
  void* blocks[200];
  for (auto& b : blocks) {
    b = malloc(5000);
    g_sink = b;
  }
  for (auto& b : blocks) free(b);
}

extern "C" __attribute__((noinline)) void small_phase() {
  void* blocks[100];
  for (auto& b : blocks) {
    b = malloc(3000);
    g_sink = b;
  }
  for (auto& b : blocks) free(b);
}

extern "C" __attribute__((noinline)) void leak_small() {
  for (int i = 0; i < 7; ++i) g_sink = malloc(2222);
}

extern "C" __attribute__((noinline)) void parent_leak() {
  for (int i = 0; i < 3; ++i) g_sink = malloc(1234);
}

extern "C" __attribute__((noinline)) void child_work() {
  for (int i = 0; i < 5; ++i) g_sink = malloc(4321);
  for (int i = 0; i < 100; ++i) {
    void* p = malloc(55);
    g_sink = p;
    free(p);
  }
}

namespace {

int dlopen_mode(const char* lib, int n) {
  for (int i = 0; i < n; ++i) {
    void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    auto fn = reinterpret_cast<void (*)()>(dlsym(h, "dl_alloc"));
    if (!fn) return 1;
    fn();
    if (dlclose(h) != 0) return 1;
  }
  parent_leak();
  return 0;
}

int fork_mode() {
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    child_work();
    _exit(0);  // no exit handlers, as fork-without-exec children usually leave
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  parent_leak();
  return 0;
}

struct Mailbox {
  std::mutex m;
  std::vector<void*> items;
};

extern "C" __attribute__((noinline)) void thread_leak() {
  for (int i = 0; i < 10; ++i) g_sink = malloc(1000);
}

extern "C" __attribute__((noinline)) void first_block() { g_sink = malloc(64); }

int first_mode(int n) {
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(
            &t, nullptr,
            [](void*) -> void* {
              first_block();
              return nullptr;
            },
            nullptr) != 0)
      return 1;
    pthread_join(t, nullptr);
  }
  return 0;
}

int threads_mode() {
  constexpr int kThreads = 8;
  static Mailbox boxes[kThreads];
  std::atomic<int> done{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([t, &done] {
      thread_leak();
      for (int i = 0; i < 1000; ++i) {
        void* p = malloc(256);
        {
          std::lock_guard lock(boxes[(t + 1) % kThreads].m);
          boxes[(t + 1) % kThreads].items.push_back(p);
        }
        std::vector<void*> mine;
        {
          std::lock_guard lock(boxes[t].m);
          mine.swap(boxes[t].items);
        }
        for (void* q : mine) free(q);
      }
      done.fetch_add(1);
      while (done.load() < kThreads) sched_yield();
      std::lock_guard lock(boxes[t].m);
      for (void* q : boxes[t].items) free(q);
      boxes[t].items.clear();
      boxes[t].items.shrink_to_fit();
    });
  }
  for (auto& t : ts) t.join();
  return 0;
}

std::atomic<long> g_handled{0};
void on_alarm(int) {
  void* p = malloc(48);
  g_sink = p;
  free(p);
  g_handled.fetch_add(1);
}

int signal_mode() {
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, nullptr);
  itimerval it{{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &it, nullptr);
  while (g_handled.load() < 150) {
    void* p = malloc(32);
    g_sink = p;
    free(p);
  }
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  std::printf("handled %ld\n", g_handled.load());
  return 0;
}

}  // namespace

extern "C" __attribute__((noinline)) void hold_blocks(int n, size_t size, int rounds) {
  std::vector<void*> blocks(static_cast<size_t>(n));
  for (auto& b : blocks) {
    b = malloc(size);
    g_sink = b;
  }
  for (int r = 0; r < rounds; ++r)
    for (auto& b : blocks) {
      free(b);
      b = malloc(size);
      g_sink = b;
    }
  for (void* b : blocks) free(b);
}

extern "C" __attribute__((noinline)) void churn_small(int n, size_t size) {
  for (int i = 0; i < n; ++i) {
    void* p = malloc(size);
    g_sink = p;
    free(p);
  }
}

int estimate_mode() {
  hold_blocks(3000, 1200, 10);
  churn_small(20000, 100);
  leak_blocks(1000, 1000);
  return 0;
}

extern "C" __attribute__((noinline)) void spread_blocks(size_t n) {
  // n clusters of 16 small blocks, each followed by a 64 KiB spacer that is never touched but for its
  // header: 4096 of them spread small blocks over 270 MB of heap, two turns of the sampled-address bitmap,
  // while touching ~30 MB.
  std::vector<void*> blocks;
  blocks.reserve(n * 17);
  for (size_t c = 0; c < n; ++c) {
    for (int i = 0; i < 16; ++i) blocks.push_back(malloc(96));
    blocks.push_back(malloc(64 << 10));
  }
  // A fixed scramble (an LCG's order of the indices), so sampled and unsampled frees interleave everywhere.
  for (size_t i = blocks.size() - 1; i > 0; --i) {
    size_t j = (i * 2862933555777941757ull + 3037000493ull) % (i + 1);
    std::swap(blocks[i], blocks[j]);
  }
  for (void* b : blocks) free(b);
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "estimate") == 0) return estimate_mode();
  if (argc >= 3 && strcmp(argv[1], "spread") == 0) {
    spread_blocks(strtoull(argv[2], nullptr, 10));
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "leak") == 0) {
    churn(1000);
    peak_phase();
    leak_blocks(atoi(argv[2]), static_cast<size_t>(atol(argv[3])));
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "peak") == 0) {
    peak_blocks();
    small_phase();
    leak_small();
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "dlopen") == 0) return dlopen_mode(argv[2], atoi(argv[3]));
  if (argc >= 2 && strcmp(argv[1], "fork") == 0) return fork_mode();
  if (argc >= 2 && strcmp(argv[1], "threads") == 0) return threads_mode();
  if (argc >= 3 && strcmp(argv[1], "first") == 0) return first_mode(atoi(argv[2]));
  if (argc >= 3 && strcmp(argv[1], "gap") == 0) {
    timespec a{}, b{};
    g_sink = malloc(7777);
    clock_gettime(CLOCK_MONOTONIC, &a);
    usleep(static_cast<useconds_t>(atoi(argv[2])) * 1000);  // the time between the two markers
    clock_gettime(CLOCK_MONOTONIC, &b);
    g_sink = malloc(8888);
    printf("gap_ms %.3f\n", double(b.tv_sec - a.tv_sec) * 1e3 + double(b.tv_nsec - a.tv_nsec) / 1e6);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "churn") == 0) {
    churn(atoi(argv[2]));
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "signal") == 0) return signal_mode();
  if (argc >= 4 && strcmp(argv[1], "forkexec") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "leak", argv[2], argv[3], static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 3; ++i) g_sink = malloc(333);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  std::fprintf(stderr,
               "usage: heap_prog leak N SIZE | threads | forkexec N SIZE | signal | peak | dlopen LIB N | "
               "fork | first N | churn N | gap MS\n");
  return 2;
}
