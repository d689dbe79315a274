// Lazy PLT binding, sampled mid-resolution: for MS milliseconds of its own CPU time (so that the samples a
// test gets follow from its CPU time, however loaded the machine), dlopen libunw_lazy_a.so (which calls 1,000
// functions of libunw_lazy_b.so through its lazily bound PLT), call lazy_call_all once, dlclose.
//   unw_lazy MS LIBDIR        main -> run_lazy -> lazy_call_all -> _dl_runtime_resolve_xsavec -> _dl_fixup...
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace {
double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
}  // namespace

volatile int g_lazy_sink;

extern "C" __attribute__((noinline)) int run_lazy(double until, const char* lib) {
  int rounds = 0;
  while (now_ms() < until) {
    void* h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "unw_lazy: %s\n", dlerror());
      std::exit(2);
    }
    auto call_all = reinterpret_cast<int (*)(int)>(dlsym(h, "lazy_call_all"));
    g_lazy_sink = call_all(rounds);
    dlclose(h);
    ++rounds;
  }
  return rounds;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  std::string lib = std::string(argv[2]) + "/libunw_lazy_a.so";
  return run_lazy(now_ms() + std::atof(argv[1]), lib.c_str()) > 0 ? 0 : 1;
}
