// C++ exceptions, for the USDT probes of libstdc++ (software nobody here wrote: libstdcxx:throw, catch):
// throw N throws and catches N exceptions on its main thread, then says how many.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace {

__attribute__((noinline)) void fail(int i) { throw std::runtime_error(std::to_string(i)); }

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10;
  int caught = 0;
  for (int i = 0; i < n; ++i) {
    try {
      fail(i);
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  std::printf("%d caught\n", caught);
  return caught == n ? 0 : 1;
}
