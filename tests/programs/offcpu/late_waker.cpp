// Off-CPU test program of the waker tracer loaded beside the program (recorder/waker.h's WakerLoader): it
// prints "started PID", then blocks reading one byte from the FIFO argv[1] (opened read-write, so that
// neither side's open blocks), which the test writes once the tracer has attached: a wait that the tracer
// sees end, woken by the test's process (tests/e2e/wakers_test.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int fd = open(argv[1], O_RDWR | O_CLOEXEC);
  if (fd < 0) return 3;
  std::printf("started %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  char c = 0;
  if (read(fd, &c, 1) != 1) return 4;
  close(fd);
  return 0;
}
