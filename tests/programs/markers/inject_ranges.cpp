// A program annotated with NVIDIA's NVTX and Intel's ITT, as libraries built with their headers are: nested
// push/pop ranges, a domain's ranges with ASCII and registered messages, start/end ranges, marks, ITT tasks
// and frames, on the main thread and a worker; thread names given to a thread by itself and by another.
// Neither SDK is a Debian package, so their client side is declared here from the public documentation: the
// loader protocol (NVTX: getenv NVTX_INJECTION64_PATH, dlopen, InitializeInjectionNvtx2(getExportTable),
// which sets the callbacks' pointers of the CORE and CORE2 modules; ITT: getenv INTEL_LIBITTNOTIFY64, dlopen,
// __itt_api_init(global, groups), which sets the pointers of the global's API list), with no-op calls when
// the variable is unset. Each range's times, read around the calls, are printed as the truth with the least
// it lasts (its sleeps):
//   inject_ranges TRUTH_FILE   (lines "TID NAME START_NS END_NS MIN_NS"; then "done" on stdout)
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

uint64_t now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void sleep_ms(int ms) {
  timespec ts{0, ms * 1000000L};
  nanosleep(&ts, nullptr);
}

// ---- NVTX's client side (nvToolsExt.h, "callback subscription" and "injection" in its documentation) ----
namespace nvtx {

struct EventAttributes {  // nvtxEventAttributes_t, version 3
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;
  uint64_t payload;
  int32_t message_type;  // 1 ASCII, 2 wide, 3 registered
  const void* message;
};
using Domain = void*;
using Fn = void (*)();

// The client's pointers: CORE module ids 1..15, CORE2 ids 1..15 (only those this program calls are typed).
Fn core[16], core2[16];
Fn *core_table[16], *core2_table[16];

int get_module_function_table(uint32_t module, Fn*** table, unsigned* size) {
  if (module != 1 && module != 5) return 0;
  Fn* slots = module == 1 ? core : core2;
  Fn** t = module == 1 ? core_table : core2_table;
  for (int i = 0; i < 16; ++i) t[i] = i ? &slots[i] : nullptr;
  *table = t;
  *size = 16;
  return 1;
}
struct Callbacks {
  size_t struct_size;
  int (*get)(uint32_t, Fn***, unsigned*);
} callbacks{sizeof(Callbacks), get_module_function_table};
const void* get_export_table(uint32_t id) { return id == 1 ? &callbacks : nullptr; }

void init() {
  const char* path = getenv("NVTX_INJECTION64_PATH");
  if (!path || !*path) return;
  void* lib = dlopen(path, RTLD_LAZY);
  if (!lib) return;
  using Init = int (*)(const void* (*)(uint32_t));
  auto entry = reinterpret_cast<Init>(dlsym(lib, "InitializeInjectionNvtx2"));
  if (!entry || !entry(get_export_table)) {  // failure: every call a no-op again
    for (Fn& f : core) f = nullptr;
    for (Fn& f : core2) f = nullptr;
  }
}

template <class F>
F slot(Fn* slots, int id) {
  return reinterpret_cast<F>(slots[id]);
}
void mark_a(const char* m) {
  if (auto f = slot<void (*)(const char*)>(core, 2)) f(m);
}
uint64_t range_start_a(const char* m) {
  auto f = slot<uint64_t (*)(const char*)>(core, 5);
  return f ? f(m) : 0;
}
void range_end(uint64_t id) {
  if (auto f = slot<void (*)(uint64_t)>(core, 7)) f(id);
}
int range_push_a(const char* m) {
  auto f = slot<int (*)(const char*)>(core, 9);
  return f ? f(m) : -1;
}
int range_pop() {
  auto f = slot<int (*)()>(core, 11);
  return f ? f() : -1;
}
void name_os_thread_a(uint32_t tid, const char* name) {
  if (auto f = slot<void (*)(uint32_t, const char*)>(core, 14)) f(tid, name);
}
void domain_mark_ex(Domain d, const EventAttributes* a) {
  if (auto f = slot<void (*)(Domain, const EventAttributes*)>(core2, 1)) f(d, a);
}
int domain_range_push_ex(Domain d, const EventAttributes* a) {
  auto f = slot<int (*)(Domain, const EventAttributes*)>(core2, 4);
  return f ? f(d, a) : -1;
}
int domain_range_pop(Domain d) {
  auto f = slot<int (*)(Domain)>(core2, 5);
  return f ? f(d) : -1;
}
void* domain_register_string_a(Domain d, const char* s) {
  auto f = slot<void* (*)(Domain, const char*)>(core2, 10);
  return f ? f(d, s) : nullptr;
}
Domain domain_create_a(const char* name) {
  auto f = slot<Domain (*)(const char*)>(core2, 12);
  return f ? f(name) : nullptr;
}

EventAttributes message(int type, const void* m) {
  return EventAttributes{3, sizeof(EventAttributes), 0, 0, 0, 0, 0, 0, type, m};
}

}  // namespace nvtx

// ---- ITT's client side (ittnotify.h and its static part's collector protocol) ----
namespace itt {

struct Domain {
  volatile int flags;
  const char* nameA;
  void* nameW;
  int extra1;
  void* extra2;
  Domain* next;
};
struct StringHandle {
  const char* strA;
  void* strW;
  int extra1;
  void* extra2;
  StringHandle* next;
};
struct Id {
  unsigned long long d1, d2, d3;
};
constexpr Id kNull{0, 0, 0};
struct ApiInfo {
  const char* name;
  void** func_ptr;
  void* init_func;
  void* null_func;
  int group;
};
struct Global {
  unsigned char magic[8];
  unsigned long version_major, version_minor, version_build;
  volatile long api_initialized, mutex_initialized, atomic_counter;
  pthread_mutex_t mutex;
  void* lib;
  void* error_handler;
  const char** dll_path_ptr;
  ApiInfo* api_list_ptr;
  Global* next;
};

Domain* (*domain_create)(const char*);
StringHandle* (*string_handle_create)(const char*);
void (*thread_set_name)(const char*);
void (*task_begin)(const Domain*, Id, Id, StringHandle*);
void (*task_end)(const Domain*);
void (*frame_begin_v3)(const Domain*, Id*);
void (*frame_end_v3)(const Domain*, Id*);

#define FXPROF_ITT_ENTRY(n) \
  { "__itt_" #n, reinterpret_cast<void**>(&n), nullptr, nullptr, 0xFFFFFF }
ApiInfo api[] = {FXPROF_ITT_ENTRY(domain_create),   FXPROF_ITT_ENTRY(string_handle_create),
                 FXPROF_ITT_ENTRY(thread_set_name), FXPROF_ITT_ENTRY(task_begin),
                 FXPROF_ITT_ENTRY(task_end),        FXPROF_ITT_ENTRY(frame_begin_v3),
                 FXPROF_ITT_ENTRY(frame_end_v3),    {nullptr, nullptr, nullptr, nullptr, 0}};
Global global{{0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30},
              3,
              0,
              0,
              0,
              0,
              0,
              PTHREAD_MUTEX_INITIALIZER,
              nullptr,
              nullptr,
              nullptr,
              api,
              nullptr};

void init() {
  const char* path = getenv("INTEL_LIBITTNOTIFY64");
  if (!path || !*path) return;
  void* lib = dlopen(path, RTLD_LAZY);
  if (!lib) return;
  using Init = void (*)(Global*, int);
  if (auto entry = reinterpret_cast<Init>(dlsym(lib, "__itt_api_init"))) entry(&global, 0xFFFFFF);
}

// The header's macros: a call only through a set pointer, and to an enabled domain.
void begin(const Domain* d, StringHandle* h) {
  if (d && d->flags && task_begin) task_begin(d, kNull, kNull, h);
}
void end(const Domain* d) {
  if (d && d->flags && task_end) task_end(d);
}

}  // namespace itt

std::mutex g_truth_lock;
std::vector<std::string> g_truth;

void truth(const char* name, uint64_t start, uint64_t end, int min_ms) {
  std::lock_guard lock(g_truth_lock);
  g_truth.push_back(std::to_string(syscall(SYS_gettid)) + " " + name + " " + std::to_string(start) + " " +
                    std::to_string(end) + " " + std::to_string(min_ms * 1000000));
}

struct Handles {
  nvtx::Domain app;
  void* registered;
  itt::Domain* domain;
  itt::StringHandle *task, *subtask;
};

void work(const Handles& h, int thread) {
  for (int i = 0; i < 5; ++i) {
    const uint64_t outer = now();
    nvtx::range_push_a("nvtx-outer");
    sleep_ms(2);
    const nvtx::EventAttributes inner = nvtx::message(3, h.registered);
    const uint64_t inner_start = now();
    nvtx::domain_range_push_ex(h.app, &inner);
    sleep_ms(1 + i + thread);
    nvtx::domain_range_pop(h.app);
    truth("nvtx-inner", inner_start, now(), 1 + i + thread);
    const uint64_t task = now();
    itt::begin(h.domain, h.task);
    const uint64_t sub = now();
    itt::begin(h.domain, h.subtask);
    sleep_ms(1);
    itt::end(h.domain);
    truth("itt-subtask", sub, now(), 1);
    sleep_ms(1);
    itt::end(h.domain);
    truth("itt-task", task, now(), 2);
    const nvtx::EventAttributes mark = nvtx::message(1, "nvtx-domain-mark");
    nvtx::domain_mark_ex(h.app, &mark);
    nvtx::mark_a("nvtx-mark");
    nvtx::range_pop();
    truth("nvtx-outer", outer, now(), 5 + i + thread);

    const uint64_t started = now();
    const uint64_t id = nvtx::range_start_a("nvtx-startend");
    sleep_ms(2);
    nvtx::range_end(id);
    truth("nvtx-startend", started, now(), 2);
    // Each thread's frames by an id of its own (a domain's frames without an id are one sequence).
    itt::Id frame_id{static_cast<unsigned long long>(thread) + 1, 0, 0};
    const uint64_t frame = now();
    if (itt::frame_begin_v3 && h.domain && h.domain->flags) itt::frame_begin_v3(h.domain, &frame_id);
    sleep_ms(1);
    if (itt::frame_end_v3 && h.domain && h.domain->flags) itt::frame_end_v3(h.domain, &frame_id);
    truth("inject.itt", frame, now(), 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: inject_ranges TRUTH_FILE\n");
    return 2;
  }
  nvtx::init();
  itt::init();
  Handles h{};
  h.app = nvtx::domain_create_a("app");
  h.registered = nvtx::domain_register_string_a(h.app, "nvtx-inner");
  if (itt::domain_create) h.domain = itt::domain_create("inject.itt");
  if (itt::string_handle_create) {
    h.task = itt::string_handle_create("itt-task");
    h.subtask = itt::string_handle_create("itt-subtask");
  }
  // Thread names: ITT's on a thread that names itself (and runs one task), NVTX's given by the main thread
  // to the worker by its id.
  std::thread named([&] {
    if (itt::thread_set_name) itt::thread_set_name("itt-named");
    itt::begin(h.domain, h.task);
    sleep_ms(1);
    itt::end(h.domain);
  });
  named.join();
  std::promise<uint32_t> worker_tid;
  std::thread worker([&] {
    worker_tid.set_value(static_cast<uint32_t>(syscall(SYS_gettid)));
    work(h, 1);
  });
  nvtx::name_os_thread_a(worker_tid.get_future().get(), "inject-worker");
  work(h, 0);
  worker.join();
  FILE* f = fopen(argv[1], "w");
  if (!f) return 1;
  for (const std::string& line : g_truth) fprintf(f, "%s\n", line.c_str());
  fclose(f);
  printf("done\n");
  return 0;
}
