// Issue 34 item 5: holders of stdio's lock. Four threads fprintf 3000-byte lines to one unbuffered FILE (a
// pipe a reader thread drains slowly): glibc formats each into buffered_vfprintf's 8 KiB stack buffer, then
// takes the FILE's lock and writes, blocking while the pipe is full with the lock held. The unlock's futex
// wake is in buffered_vfprintf, 8 KiB and more below its caller: the waker's stack copy must reach
// print_rows, the holder. Prints "file lock 0x..." (the FILE's lock address: its _lock) on stdout.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4, kLines = 40;
std::string line(3000, 'x');

}  // namespace

__attribute__((noinline)) void print_rows(FILE* out) {
  for (int i = 0; i < kLines; ++i) std::fprintf(out, "%d %s\n", i, line.c_str());
  asm volatile("");
}

int main() {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  fcntl(fds[1], F_SETPIPE_SZ, 4096);  // one page: a writer blocks holding the FILE's lock
  FILE* out = fdopen(fds[1], "w");
  if (out == nullptr) return 1;
  setvbuf(out, nullptr, _IONBF, 0);  // unbuffered: fprintf goes through buffered_vfprintf
  std::printf("file lock %p\n", static_cast<void*>(out->_lock));
  std::fflush(stdout);
  // The main thread's reader drains the pipe a little at a time until the writers are done (EOF).
  std::thread reader([&] {
    char buf[512];
    while (read(fds[0], buf, sizeof buf) > 0) {
    }
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(print_rows, out);
  for (auto& t : threads) t.join();
  std::fclose(out);
  reader.join();
  return 0;
}
