// A library heap_prog dlopens and dlcloses (tests/heap/source_test.cpp): dl_alloc() leaks one 4444-byte
// block and makes 10 temporary 96-byte ones, so that its stacks run through code that is later unmapped.
#include <cstdlib>

extern "C" {
void* volatile g_dl_sink;

__attribute__((visibility("default"), noinline)) void dl_alloc() {
  g_dl_sink = malloc(4444);  // leaked on purpose
  for (int i = 0; i < 10; ++i) {
    void* p = malloc(96);
    g_dl_sink = p;
    free(p);
  }
}
}
