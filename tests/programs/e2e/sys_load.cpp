// The programs of the `record -a` test (tests/e2e/system_test.cpp), one binary in four roles, each spinning
// in a function of its own name and logging its CPU time ("ROLE MS", cpu_log.h) as it ends:
//   e2e_sys attached IN OUT   runs before the recording: logs "waiting", blocks on FIFO IN until the driver
//                             writes, spins
//                             500 ms of CPU in attached_spin, logs "attached", then writes a byte to FIFO OUT
//   e2e_sys driver IN OUT     the recording's COMMAND: starts the attached one's work, forks and execs a
//                             "forked" (mid-way) and then a "short" one, waits for each, then for the
//                             attached one's byte; its end stops the recording
//   e2e_sys forked            spins 400 ms in forked_spin
//   e2e_sys short             spins 100 ms in short_spin (starts and ends within the recording)
//   e2e_sys loopback          sends over a TCP connection to itself on 127.0.0.1 until it used 300 ms of
//                             CPU, logs "loopback": the receive runs as a softirq in the sender's time
// Synchronised by pipes and wait(), never by sleeping.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "cpu_spin.h"

namespace {

// The empty asm after the call keeps each a frame of its own (no tail call), so its name is on the stack.
__attribute__((noinline)) void attached_spin() {
  spin_cpu_ms(500);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void forked_spin() {
  spin_cpu_ms(400);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void short_spin() {
  spin_cpu_ms(100);
  asm volatile("" ::: "memory");
}

int run_self(const char* self, const char* role) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, role, static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return 1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int attached(const char* in, const char* out) {
  char c = 0;
  cpu_log("waiting");                             // the test starts the recording once it is logged
  const int fd = open(in, O_RDONLY | O_CLOEXEC);  // blocks until the driver opens it
  if (fd < 0 || read(fd, &c, 1) != 1) return 1;
  close(fd);
  attached_spin();
  cpu_log("attached");
  const int w = open(out, O_WRONLY | O_CLOEXEC);
  if (w < 0 || write(w, "d", 1) != 1) return 1;
  close(w);
  return 0;
}

int driver(const char* self, const char* in, const char* out) {
  const int w = open(in, O_WRONLY | O_CLOEXEC);
  if (w < 0 || write(w, "g", 1) != 1) return 1;
  close(w);
  if (run_self(self, "forked") != 0 || run_self(self, "short") != 0) return 1;
  char c = 0;
  const int r = open(out, O_RDONLY | O_CLOEXEC);
  if (r < 0 || read(r, &c, 1) != 1) return 1;
  close(r);
  cpu_log("driver");
  return 0;
}

double cpu_ms_used() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

int loopback() {
  const int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (srv < 0 || bind(srv, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(srv, 1) != 0 ||
      getsockname(srv, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 1;
  const int tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (tx < 0 || connect(tx, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 1;
  const int rx = accept(srv, nullptr, nullptr);
  if (rx < 0) return 1;
  std::thread sink([rx] {
    static char in[1 << 16];
    while (read(rx, in, sizeof in) > 0) {
    }
  });
  static char out[1 << 16];
  while (cpu_ms_used() < 300)
    if (write(tx, out, sizeof out) <= 0) return 1;
  close(tx);
  sink.join();
  cpu_log("loopback");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "attached") == 0) return attached(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "driver") == 0) return driver(argv[0], argv[2], argv[3]);
  if (argc == 2 && std::strcmp(argv[1], "forked") == 0) {
    forked_spin();
    cpu_log("forked");
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "short") == 0) {
    short_spin();
    cpu_log("short");
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "loopback") == 0) return loopback();
  std::fprintf(stderr, "usage: e2e_sys attached|driver IN OUT | forked | short | loopback\n");
  return 2;
}
