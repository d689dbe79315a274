// Unwind test program: -O2 without frame pointers, each mode spends its time on one known call path.
//   unw_prog recurse MS      main -> run_recurse -> recurse x 20 -> recurse_leaf
//   unw_prog qsort MS        main -> run_qsort -> qsort (libc) -> ... -> compare_slow
//   unw_prog signal MS       main -> sig_victim, interrupted every 2 ms by SIGPROF -> on_signal ->
//   handler_work unw_prog thread MS       start_thread -> thread_main -> thread_work (main thread waits in
//   pthread_join) unw_prog dlopen MS LIB   main -> run_dlopen -> lib_outer -> lib_inner (in LIB, loaded with
//   dlopen) unw_prog fork MS         a forked child: main -> run_fork -> child_work (the parent waits)
//   unw_prog plt MS          main -> run_plt -> plt_nop (libunw_plt.so) through the PLT, over and over
//   unw_prog vdso MS         main -> run_vdso -> clock_gettime (libc) -> the vDSO, over and over
//   unw_prog mixed MS LIB    recurse, qsort, signal, thread and dlopen, one after the other
// MS is the calling thread's CPU time (the vdso mode's excepted: wall time), so that the samples a test gets
// follow from CPU time, however loaded the machine.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" {
int plt_nop(int x);  // libunw_plt.so
volatile uint64_t g_sink;
volatile int g_depth_seen;

static double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) uint64_t recurse_leaf(double until) {
  uint64_t x = 1;
  while (now_ms() < until)
    for (int i = 0; i < 20000; ++i) x = x * 2862933555777941757ull + 3037000493ull;
  return x;
}

__attribute__((noinline)) uint64_t recurse(int depth, double until) {
  uint64_t r = depth == 0 ? recurse_leaf(until) : recurse(depth - 1, until);
  g_depth_seen = depth;  // work after the call: no tail call, no loop
  return r + static_cast<uint64_t>(depth);
}

__attribute__((noinline)) void run_recurse(double ms) { g_sink = recurse(19, now_ms() + ms); }

__attribute__((noinline)) int compare_slow(const void* a, const void* b) {
  uint64_t x = *static_cast<const uint32_t*>(a);
  for (int i = 0; i < 200; ++i) x = x * 6364136223846793005ull + 1;
  g_sink = x;
  uint32_t l = *static_cast<const uint32_t*>(a), r = *static_cast<const uint32_t*>(b);
  return l < r ? -1 : l > r;
}

__attribute__((noinline)) void run_qsort(double ms) {
  static uint32_t v[4096];
  double until = now_ms() + ms;
  uint32_t seed = 1;
  while (now_ms() < until) {
    for (auto& x : v) x = seed = seed * 1103515245u + 12345u;
    qsort(v, 4096, sizeof v[0], compare_slow);
  }
}

__attribute__((noinline)) void handler_work() {
  double until = now_ms() + 1.0;
  uint64_t x = 7;
  while (now_ms() < until)
    for (int i = 0; i < 2000; ++i) x = x * 2862933555777941757ull + 1;
  g_sink = x;
}

__attribute__((noinline)) void on_signal(int) {
  handler_work();
  g_depth_seen = 1;
}

__attribute__((noinline)) void sig_victim(double until) {
  uint64_t x = 3;
  // No calls in the hot loop: an interrupted sample is in sig_victim itself.
  for (;;) {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    g_sink = x;
    if (now_ms() >= until) break;
  }
}

__attribute__((noinline)) void run_signal(double ms) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGPROF, &sa, nullptr);
  itimerval it{{0, 2000}, {0, 2000}};
  setitimer(ITIMER_PROF, &it, nullptr);
  sig_victim(now_ms() + ms);
  itimerval off{};
  setitimer(ITIMER_PROF, &off, nullptr);
  signal(SIGPROF, SIG_IGN);
}

__attribute__((noinline)) uint64_t thread_work(double until) {
  uint64_t x = 5;
  while (now_ms() < until)
    for (int i = 0; i < 20000; ++i) x = x * 2862933555777941757ull + 7;
  return x;
}

void* thread_main(void* arg) {
  g_sink = thread_work(now_ms() + *static_cast<double*>(arg));
  return nullptr;
}

__attribute__((noinline)) void run_thread(double ms) {
  pthread_t t;
  pthread_create(&t, nullptr, thread_main, &ms);
  pthread_join(t, nullptr);
}

__attribute__((noinline)) void run_dlopen(double ms, const char* lib) {
  void* h = dlopen(lib, RTLD_NOW);
  if (!h) {
    std::fprintf(stderr, "unw_prog: %s\n", dlerror());
    std::exit(2);
  }
  auto fn = reinterpret_cast<uint64_t (*)(uint64_t)>(dlsym(h, "lib_outer"));
  double until = now_ms() + ms;
  uint64_t n = 0;
  while (now_ms() < until) g_sink = fn(++n);
}

__attribute__((noinline)) uint64_t child_work(double until) {
  uint64_t x = 9;
  while (now_ms() < until)
    for (int i = 0; i < 20000; ++i) x = x * 2862933555777941757ull + 11;
  return x;
}

__attribute__((noinline)) void run_fork(double ms) {
  pid_t p = fork();
  if (p == 0) {
    g_sink = child_work(now_ms() + ms);
    _exit(0);
  }
  int st;
  waitpid(p, &st, 0);
}

__attribute__((noinline)) void run_plt(double ms) {
  double until = now_ms() + ms;
  uint64_t n = 0;
  while (now_ms() < until)
    for (int i = 0; i < 1000; ++i)
      n += static_cast<uint64_t>(plt_nop(i));  // a 2-instruction call via the PLT
  g_sink = n;
}
}

extern "C" __attribute__((noinline)) void run_vdso(double ms) {
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  double until = start.tv_sec * 1e3 + start.tv_nsec / 1e6 + ms;
  uint64_t n = 0;
  for (;;) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ++n;
    if (ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 >= until) break;
  }
  g_sink = n;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: unw_prog recurse|qsort|signal|thread|dlopen|fork|plt|vdso|mixed MS [LIB]\n");
    return 2;
  }
  const char* mode = argv[1];
  double ms = std::atof(argv[2]);
  const char* lib = argc > 3 ? argv[3] : "";
  bool mixed = std::strcmp(mode, "mixed") == 0;
  auto is = [&](const char* m) { return mixed || std::strcmp(mode, m) == 0; };
  if (is("recurse")) run_recurse(ms);
  if (is("qsort")) run_qsort(ms);
  if (is("signal")) run_signal(ms);
  if (is("thread")) run_thread(ms);
  if (is("dlopen")) run_dlopen(ms, lib);
  if (std::strcmp(mode, "fork") == 0) run_fork(ms);
  if (std::strcmp(mode, "plt") == 0) run_plt(ms);
  if (std::strcmp(mode, "vdso") == 0) run_vdso(ms);
  return 0;
}
