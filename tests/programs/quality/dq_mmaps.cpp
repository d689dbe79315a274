// `dq_mmaps ROUNDS MAPS PROGRAM ARGS...`: ROUNDS times, maps and unmaps its own executable MAPS times (each
// an executable file mapping: one MMAP2 record each, faster than any reader drains a small ring buffer), then
// forks a child that execs PROGRAM ARGS at once and waits for it. The child's exec and mmap records come
// right behind the burst: with a tiny ring buffer they are lost, and its samples land in code the recorder
// has no mapping for.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const int rounds = std::atoi(argv[1]), maps = std::atoi(argv[2]);
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 3;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < maps; ++i) {
      void* p = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) return 4;
      munmap(p, 4096);
    }
    pid_t pid = fork();
    if (pid == 0) {
      execv(argv[3], argv + 3);
      _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 5;
  }
  return 0;
}
