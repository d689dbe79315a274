// Off-CPU test program: the main thread sleeps 200 ms at the bottom of 48 nested calls of
// offcpu_deep_recurse with 512 bytes of locals each (~26 KiB of stack): deeper than the default off-CPU stack
// copy (8 KiB) and within the largest (65528 bytes). Built without frame pointers, as the other programs:
// nothing completes a cut stack.
#include <time.h>

namespace {

__attribute__((noinline)) int offcpu_deep_recurse(int depth) {
  volatile char pad[512];
  pad[0] = static_cast<char>(depth);
  pad[511] = 1;
  if (depth == 0) {
    timespec ts{0, 200 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
    return pad[0] + pad[511];
  }
  return offcpu_deep_recurse(depth - 1) + pad[0] + pad[511];  // not a tail call: every frame stays
}

}  // namespace

int main() { return offcpu_deep_recurse(48) > 0 ? 0 : 1; }
