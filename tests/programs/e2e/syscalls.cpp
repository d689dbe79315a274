// Spends most of its time in the kernel: large reads from /dev/zero (the kernel clears user memory).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <vector>

__attribute__((noinline)) long read_zero_loop(int fd, std::vector<char>& buf, std::chrono::milliseconds d) {
  long total = 0;
  auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) total += read(fd, buf.data(), buf.size());
  return total;
}

int main() {
  int fd = open("/dev/zero", O_RDONLY);
  if (fd < 0) return 1;
  std::vector<char> buf(1 << 20);
  long n = read_zero_loop(fd, buf, std::chrono::milliseconds(400));
  close(fd);
  return n > 0 ? 0 : 1;
}
