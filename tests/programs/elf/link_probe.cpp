// ELF layout test program, linked several ways (lld, GNU ld with and without -z separate-code):
//   link_probe addr      print the runtime address of elf_probe_hot, then wait until stdin closes
//   link_probe spin MS   burn MS ms of CPU time in elf_probe_hot, called through elf_probe_outer
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" {

volatile uint64_t elf_probe_sink;

static uint64_t cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

__attribute__((noinline)) void elf_probe_hot(uint64_t ms) {
  uint64_t end = cpu_ms() + ms, x = 1;
  while (cpu_ms() < end)
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  elf_probe_sink = x;
}

__attribute__((noinline)) void elf_probe_outer(uint64_t ms) {
  elf_probe_hot(ms);
  elf_probe_sink = elf_probe_sink + 1;  // not a tail call: the caller's frame stays on the stack
}
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "addr") == 0) {
    std::printf("%p\n", reinterpret_cast<void*>(&elf_probe_hot));
    std::fflush(stdout);
    while (std::getchar() != EOF) {
    }
    return 0;
  }
  if (argc >= 3 && std::strcmp(argv[1], "spin") == 0) {
    elf_probe_outer(std::strtoull(argv[2], nullptr, 10));
    return 0;
  }
  std::fprintf(stderr, "usage: link_probe addr | spin MS\n");
  return 2;
}
