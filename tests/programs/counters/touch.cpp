// counters_touch PAGES [SLEEPS] [CHILD_PAGES] [EXIT]: touches PAGES fresh pages in touch_pages (one page
// fault each), prints "touched", sleeps 2 ms SLEEPS times (a context switch each), forks a child that touches
// CHILD_PAGES pages when given, then sleeps 50 ms (so a 10 ms sampler sees the end) and exits with EXIT. With
// COUNTERS_TOUCH_GO=FIFO in the environment it reads a byte from FIFO after "touched", before the sleeps: a
// test that attaches writes it once the attach is done, so that every sleep is counted however late the
// attach came.
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

__attribute__((noinline)) long touch_pages(long pages) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* p = static_cast<volatile char*>(mmap(nullptr, static_cast<size_t>(pages * page),
                                             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) return -1;
  long sum = 0;
  for (long i = 0; i < pages; ++i) {
    p[i * page] = static_cast<char>(i);
    sum += p[i * page];
  }
  return sum;
}

static void nap(long ms) {
  timespec ts{0, ms * 1000000};
  nanosleep(&ts, nullptr);
}

int main(int argc, char** argv) {
  const long pages = argc > 1 ? std::atol(argv[1]) : 1000;
  const long sleeps = argc > 2 ? std::atol(argv[2]) : 0;
  const long child_pages = argc > 3 ? std::atol(argv[3]) : 0;
  const int code = argc > 4 ? std::atoi(argv[4]) : 0;
  long sum = touch_pages(pages);
  std::printf("touched\n");  // a test attaching to us waits for this line
  std::fflush(stdout);
  if (const char* go = std::getenv("COUNTERS_TOUCH_GO"); go && *go) {
    FILE* f = std::fopen(go, "r");
    if (!f || std::fgetc(f) == EOF) return 3;
    std::fclose(f);
  }
  for (long i = 0; i < sleeps; ++i) nap(2);
  if (child_pages > 0) {
    pid_t pid = fork();
    if (pid == 0) {
      sum += touch_pages(child_pages);
      nap(50);
      _exit(sum == 12345 ? 1 : 0);
    }
    int st;
    waitpid(pid, &st, 0);
  }
  nap(50);
  std::printf("%ld\n", sum);
  return code;
}
