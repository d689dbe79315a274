// Recorder test program: `rec_forkexec PLUGIN.so [CHILDREN]`: forks CHILDREN (50) children that each exec
// /bin/true (half with fork, half with posix_spawn), one fork child that works without exec, then dlopens
// PLUGIN and spins in it for 150 ms of CPU time.
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "../cpu_log.h"

extern char** environ;

namespace {

volatile uint64_t g_sink;

uint64_t cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// 100 ms of CPU time.
__attribute__((noinline)) void rec_fork_child_work() {
  uint64_t end = cpu_ms() + 100;
  uint64_t x = 3;
  while (cpu_ms() < end)
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1;
  g_sink = x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int children = argc > 2 ? std::atoi(argv[2]) : 50;
  for (int i = 0; i < children; ++i) {
    pid_t pid;
    if (i % 2 == 0) {
      pid = fork();
      if (pid == 0) {
        execl("/bin/true", "true", static_cast<char*>(nullptr));
        _exit(127);
      }
    } else {
      char* args[] = {const_cast<char*>("true"), nullptr};
      if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, args, environ) != 0) return 3;
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 4;
  }
  pid_t worker = fork();
  if (worker == 0) {
    rec_fork_child_work();
    cpu_log("worker");
    _exit(0);
  }
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 5;
  }
  auto work = reinterpret_cast<uint64_t (*)(uint64_t)>(dlsym(h, "rec_plugin_work"));
  if (!work) return 6;
  g_sink = work(150);
  int st;
  waitpid(worker, &st, 0);
  return 0;
}
