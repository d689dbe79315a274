// counters_writes N: N one-byte write(2) calls to /dev/null from write_bytes, and nothing else written.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

__attribute__((noinline)) int write_bytes(int fd, long n) {
  int failed = 0;
  for (long i = 0; i < n; ++i) failed += write(fd, "x", 1) != 1;
  return failed;
}

int main(int argc, char** argv) {
  const int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  return write_bytes(fd, argc > 1 ? std::atol(argv[1]) : 1000) != 0;
}
