// Intel ITT's collector interface (inject.h). ittnotify's static part (compiled into the program, LLVM's
// libomp, oneTBB...) dlopen()s INTEL_LIBITTNOTIFY64 at its first call; a library exporting __itt_api_init
// is "version 2": it is called with the static part's __itt_global, whose api_list_ptr lists every
// function pointer the program calls through ("__itt_task_begin" -> &its pointer), and sets the pointers of
// what it implements (the others get the entry's null function). Declared here from the public
// documentation of ittnotify (the headers are not a Debian package); only the leading members of
// __itt_global that we read, whose layout has not changed since ITT's first versions.
//
// Markers: tasks (task_begin/end) nest per thread and domain; frames (frame_begin/end_v3, frame_submit_v3)
// and regions (region_begin/end) are intervals named by their domain (frames) or name (regions); events
// (event_start/end) nest per thread; __itt_marker and __itt_mark are instant markers; thread_set_name names
// the thread. __itt_get_timestamp is CLOCK_MONOTONIC nanoseconds, the clock of the samples, so submitted
// frames land where they happened.
#include <dlfcn.h>
#include <pthread.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "inject/inject.h"

namespace fxprof::inject {

namespace {

// __itt_domain and __itt_string_handle: the program reads a domain's flags (0: disabled) before each call,
// and the static part creates both before the library is loaded, so ours have the same layout.
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
using Timestamp = unsigned long long;
constexpr Timestamp kTimestampNone = ~0ull;

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
};
#if defined(__x86_64__) || defined(__aarch64__)
static_assert(offsetof(Global, api_list_ptr) == 120);
#endif
constexpr unsigned char kMagic[8] = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30};

std::mutex g_lock;
std::map<std::string, Domain>& domains() { return immortal<std::map<std::string, Domain>>(); }
std::map<std::string, StringHandle>& strings() { return immortal<std::map<std::string, StringHandle>>(); }
std::deque<std::string>& events() { return immortal<std::deque<std::string>>(); }

const char* domain_name(const Domain* d) { return d && d->nameA ? d->nameA : "ITT"; }
const char* string_of(const StringHandle* h) { return h && h->strA ? h->strA : ""; }

// A start/end key of ours: a domain and an id (frames and regions), apart from NVTX's counters.
uint64_t key_of(const Domain* d, const Id* id) {
  uint64_t h = reinterpret_cast<uintptr_t>(d) * 0x9E3779B97F4A7C15ull;
  if (id) h ^= (id->d1 * 0xC2B2AE3D27D4EB4Full) ^ (id->d2 * 0x165667B19E3779F9ull) ^ id->d3;
  return h | (1ull << 63);
}

const char* event_name(int e) {
  std::lock_guard lock(g_lock);
  return e >= 0 && static_cast<size_t>(e) < events().size() ? events()[static_cast<size_t>(e)].c_str()
                                                            : "event";
}

// The functions, with ITT's signatures.
Domain* domain_create(const char* name) {
  std::lock_guard lock(g_lock);
  auto [it, fresh] = domains().try_emplace(name ? name : "");
  if (fresh) it->second = Domain{1, it->first.c_str(), nullptr, 0, nullptr, nullptr};
  return &it->second;
}
StringHandle* string_handle_create(const char* name) {
  std::lock_guard lock(g_lock);
  auto [it, fresh] = strings().try_emplace(name ? name : "");
  if (fresh) it->second = StringHandle{it->first.c_str(), nullptr, 0, nullptr, nullptr};
  return &it->second;
}
void thread_set_name(const char* name) { thread_name(0, name); }
void thr_name_set(const char* name, int) { thread_name(0, name); }
Timestamp get_timestamp() { return now_ns(); }

void task_begin(const Domain* d, Id, Id, StringHandle* name) { push(d, domain_name(d), string_of(name)); }
void task_begin_fn(const Domain* d, Id, Id, void* fn) {
  if (!recording()) return;
  Dl_info info{};
  char name[kNameMax];
  if (dladdr(fn, &info) && info.dli_sname)
    snprintf(name, sizeof name, "%s", info.dli_sname);
  else
    snprintf(name, sizeof name, "task %p", fn);
  push(d, domain_name(d), name);
}
void task_end(const Domain* d) { pop(d); }

void frame_begin_v3(const Domain* d, Id* id) { start(key_of(d, id), "frame", domain_name(d)); }
void frame_end_v3(const Domain* d, Id* id) { end(key_of(d, id)); }
void frame_submit_v3(const Domain* d, Id*, Timestamp begin, Timestamp end) {
  if (begin == kTimestampNone) return;
  interval("frame", domain_name(d), begin, end == kTimestampNone ? now_ns() : end);
}
void region_begin(const Domain* d, Id id, Id, StringHandle* name) {
  start(key_of(d, &id), domain_name(d), string_of(name));
}
void region_end(const Domain* d, Id id) { end(key_of(d, &id)); }
void marker(const Domain* d, Id, StringHandle* name, int) { instant(domain_name(d), string_of(name)); }

int event_create(const char* name, int length) {
  std::lock_guard lock(g_lock);
  events().emplace_back(name ? name : "",
                        name && length > 0 ? strnlen(name, static_cast<size_t>(length)) : 0);
  return static_cast<int>(events().size() - 1);
}
// An event's stack is its own (a scope apart from every domain's).
const void* event_scope(int e) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(e) * 2 + 1); }
int event_start(int e) {
  if (recording()) push(event_scope(e), "event", event_name(e));
  return 0;
}
int event_end(int e) {
  pop(event_scope(e));
  return 0;
}
int mark_create(const char* name) { return event_create(name, name ? static_cast<int>(strlen(name)) : 0); }
int mark(int mt, const char* parameter) {
  if (!recording()) return 0;
  const Field f{"parameter", parameter ? parameter : "", 0};
  instant("mark", event_name(mt), &f, parameter ? 1 : 0);
  return 0;
}

template <class F>
void* fn(F f) {
  return reinterpret_cast<void*>(f);
}

struct Entry {
  const char* name;
  void* f;
};
const Entry kOurs[] = {
    {"__itt_domain_create", fn(domain_create)},
    {"__itt_string_handle_create", fn(string_handle_create)},
    {"__itt_thread_set_name", fn(thread_set_name)},
    {"__itt_thr_name_set", fn(thr_name_set)},
    {"__itt_get_timestamp", fn(get_timestamp)},
    {"__itt_task_begin", fn(task_begin)},
    {"__itt_task_begin_fn", fn(task_begin_fn)},
    {"__itt_task_end", fn(task_end)},
    {"__itt_frame_begin_v3", fn(frame_begin_v3)},
    {"__itt_frame_end_v3", fn(frame_end_v3)},
    {"__itt_frame_submit_v3", fn(frame_submit_v3)},
    {"__itt_region_begin", fn(region_begin)},
    {"__itt_region_end", fn(region_end)},
    {"__itt_marker", fn(marker)},
    {"__itt_event_create", fn(event_create)},
    {"__itt_event_start", fn(event_start)},
    {"__itt_event_end", fn(event_end)},
    {"__itt_mark_create", fn(mark_create)},
    {"__itt_mark", fn(mark)},
    {"__itt_mark_global", fn(mark)},
};

void* ours(const char* name) {
  for (const Entry& e : kOurs)
    if (strcmp(e.name, name) == 0) return e.f;
  return nullptr;
}

}  // namespace

}  // namespace fxprof::inject

using namespace fxprof::inject;

// Called once by each ittnotify static part (the program and every library with its own copy).
FXPROF_INJECT_API void __itt_api_init(Global* g, int /*init_groups*/) {
  if (!g || memcmp(g->magic, kMagic, sizeof kMagic) != 0 || !g->api_list_ptr) return;
  for (ApiInfo* a = g->api_list_ptr; a->name; ++a) {
    if (!a->func_ptr) continue;
    void* f = ours(a->name);
    *a->func_ptr = f ? f : a->null_func;
  }
}

FXPROF_INJECT_API void __itt_api_fini(Global*) {}
