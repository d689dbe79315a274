// A program that treats inherited descriptors as its own, as daemons and shells do, for `record --heap`:
//   heap_fds closeall DIR N   closes every descriptor from 3 up, opens DIR/a and DIR/b, makes N allocations
//                             (each written to a file in between), writes "a\n" and "b\n", exits 0
//   heap_fds dup2all LOG N    opens LOG and dup2s it over every descriptor from 3 to 1023, allocates, writes
//                             "log\n" to LOG through its first descriptor, exits 0
//   heap_fds handshake IN OUT writes "ready\n" to the FIFO OUT, waits for a line on the FIFO IN, allocates
//                             for a while (its chunks go to a recorder that may be gone), exits 7
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void* volatile sink;

void churn(long n) {
  for (long i = 0; i < n; ++i) {
    void* p = malloc(static_cast<size_t>(16 + i % 200));
    sink = p;
    free(p);
  }
}

bool write_text(int fd, const char* s) { return write(fd, s, strlen(s)) == static_cast<ssize_t>(strlen(s)); }

int closeall(const std::string& dir, long n) {
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  const int a = open((dir + "/a").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int b = open((dir + "/b").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (a < 0 || b < 0) return 2;
  churn(n);
  if (!write_text(a, "a\n") || !write_text(b, "b\n")) return 3;
  churn(n);  // flushed at exit
  return 0;
}

int dup2all(const std::string& log, long n) {
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 2;
  for (int to = 3; to < 1024; ++to)
    if (to != fd) dup2(fd, to);
  churn(n);
  if (!write_text(fd, "log\n")) return 3;
  churn(n);
  return 0;
}

int handshake(const char* in, const char* out) {
  FILE* o = fopen(out, "w");
  if (!o) return 2;
  fputs("ready\n", o);
  fclose(o);
  FILE* i = fopen(in, "r");
  char line[64];
  if (!i || !fgets(line, sizeof line, i)) return 3;
  fclose(i);
  churn(2000000);  // hundreds of chunks, to a pipe whose reader is gone
  return 7;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "closeall") == 0) return closeall(argv[2], atol(argv[3]));
  if (argc == 4 && std::strcmp(argv[1], "dup2all") == 0) return dup2all(argv[2], atol(argv[3]));
  if (argc == 4 && std::strcmp(argv[1], "handshake") == 0) return handshake(argv[2], argv[3]);
  std::fprintf(stderr, "usage: heap_fds closeall DIR N | dup2all LOG N | handshake IN OUT\n");
  return 2;
}
