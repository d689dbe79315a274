// The NVTX/ITT injection library's cost per range (inject/): an NVTX push/pop pair and an ITT task begin/end,
// each timed over N ranges in CPU time per range, called as their clients call: through the function
// pointer the library set. Three ways (bench/inject.sh): no library (the client's null test), the library
// loaded but not recording (FXPROF_MARKERS unset), and recording (as under `fxprof record`).
//   fxprof_inject_bench LIBRARY|- [N]
#include <dlfcn.h>
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

uint64_t cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// NVTX's CORE callback table (module 1): push A is id 9, pop id 11.
using Fn = void (*)();
Fn core[16];
Fn* core_table[16];
int get_table(uint32_t module, Fn*** table, unsigned* size) {
  if (module != 1) return 0;
  for (int i = 0; i < 16; ++i) core_table[i] = i ? &core[i] : nullptr;
  *table = core_table;
  *size = 16;
  return 1;
}
struct Callbacks {
  size_t struct_size;
  int (*get)(uint32_t, Fn***, unsigned*);
} callbacks{sizeof(Callbacks), get_table};
const void* export_table(uint32_t id) { return id == 1 ? &callbacks : nullptr; }

// ITT: the global's API list (only its leading members, as the static part lays them out).
struct Domain {
  volatile int flags;
  const char* name;
  void* w;
  int e1;
  void* e2;
  Domain* next;
};
struct Handle {
  const char* str;
  void* w;
  int e1;
  void* e2;
  Handle* next;
};
struct Id {
  unsigned long long a, b, c;
};
struct ApiInfo {
  const char* name;
  void** ptr;
  void* init;
  void* null;
  int group;
};
struct Global {
  unsigned char magic[8];
  unsigned long v[3];
  long l[3];
  pthread_mutex_t mutex;
  void *lib, *handler;
  const char** dll;
  ApiInfo* api;
};
Domain* (*domain_create)(const char*);
Handle* (*handle_create)(const char*);
void (*task_begin)(const Domain*, Id, Id, Handle*);
void (*task_end)(const Domain*);
ApiInfo api[] = {
    {"__itt_domain_create", reinterpret_cast<void**>(&domain_create), nullptr, nullptr, -1},
    {"__itt_string_handle_create", reinterpret_cast<void**>(&handle_create), nullptr, nullptr, -1},
    {"__itt_task_begin", reinterpret_cast<void**>(&task_begin), nullptr, nullptr, -1},
    {"__itt_task_end", reinterpret_cast<void**>(&task_end), nullptr, nullptr, -1},
    {nullptr, nullptr, nullptr, nullptr, 0}};
Global global{{0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30},
              {3, 0, 0},
              {0, 0, 0},
              PTHREAD_MUTEX_INITIALIZER,
              nullptr,
              nullptr,
              nullptr,
              api};

template <typename F>
double ns_per(unsigned n, F&& f) {
  const uint64_t t0 = cpu_ns();
  for (unsigned i = 0; i < n; ++i) f();
  return static_cast<double>(cpu_ns() - t0) / n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fxprof_inject_bench LIBRARY|- [N]\n");
    return 2;
  }
  const unsigned n = argc > 2 ? static_cast<unsigned>(strtoul(argv[2], nullptr, 10)) : 1000000;
  if (argv[1][0] != '-') {
    void* lib = dlopen(argv[1], RTLD_LAZY);
    auto nvtx =
        lib ? reinterpret_cast<int (*)(const void* (*)(uint32_t))>(dlsym(lib, "InitializeInjectionNvtx2"))
            : nullptr;
    auto itt = lib ? reinterpret_cast<void (*)(Global*, int)>(dlsym(lib, "__itt_api_init")) : nullptr;
    if (!nvtx || !itt || !nvtx(export_table)) {
      fprintf(stderr, "fxprof_inject_bench: %s is not the injection library\n", argv[1]);
      return 1;
    }
    itt(&global, -1);
  }
  auto push = reinterpret_cast<int (*)(const char*)>(core[9]);
  auto pop = reinterpret_cast<int (*)()>(core[11]);
  const Domain* d = domain_create ? domain_create("bench") : nullptr;
  Handle* h = handle_create ? handle_create("task") : nullptr;
  const double nvtx = ns_per(n, [&] {
    if (push) push("range");
    if (pop) pop();
  });
  const double itt = ns_per(n, [&] {
    if (d && d->flags && task_begin) task_begin(d, Id{}, Id{}, h);
    if (d && d->flags && task_end) task_end(d);
  });
  const char* how = argv[1][0] == '-'          ? "no library"
                    : getenv("FXPROF_MARKERS") ? "recording"
                                               : "loaded, not recording";
  printf("%-22s NVTX push/pop %7.1f ns/range   ITT task begin/end %7.1f ns/range   (%u ranges, CPU time)\n",
         how, nvtx, itt, n);
  return 0;
}
