// `dq_work MS [READY GO]`: spins MS milliseconds of CPU time in dq_outer -> dq_middle -> dq_inner (a known
// call path, -O2 without frame pointers). With READY and GO (FIFOs), it first writes "ready\n" to READY and
// waits until GO is closed by the test: a test deletes the binary in between.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "../e2e/cpu_spin.h"

namespace {
volatile int depth_sink;

__attribute__((noinline)) void dq_inner(long ms) {
  spin_cpu_ms(ms);
  depth_sink = 1;
}
__attribute__((noinline)) void dq_middle(long ms) {
  dq_inner(ms);
  depth_sink = 2;
}
__attribute__((noinline)) void dq_outer(long ms) {
  dq_middle(ms);
  depth_sink = 3;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long ms = std::atol(argv[1]);
  if (argc >= 4) {
    int ready = open(argv[2], O_WRONLY | O_CLOEXEC);
    if (ready < 0 || write(ready, "ready\n", 6) != 6) return 3;
    close(ready);
    int go = open(argv[3], O_RDONLY | O_CLOEXEC);
    if (go < 0) return 4;
    char c;
    while (read(go, &c, 1) > 0) {
    }
    close(go);
  }
  dq_outer(ms);
  cpu_log("main");
  return 0;
}
