// NVTX's injection interface (inject.h). The NVTX client (nvToolsExt.h, header-only, in the program and in
// each library built with it) dlopen()s NVTX_INJECTION64_PATH on its first call and calls
// InitializeInjectionNvtx2(getExportTable); the export table NVTX_ETID_CALLBACKS (1) gives
// GetModuleFunctionTable(module, &table, &size): table[id] points at the client's function pointer for
// callback `id` of that module, which we set. Modules and ids as NVTX documents them (nvtxTypes.h,
// "callback subscription"): CORE (1) and CORE2 (5, domains); the CUDA, OpenCL and sync modules are left to
// the client's no-ops. Declared here from that documentation: the NVTX headers are not a Debian package.
//
// Markers: push/pop ranges nest per thread and domain; start/end ranges are written by the thread that ends
// them; marks are instant markers. The marker's category is the NVTX category's name when the program named
// it (nvtxNameCategory), else the domain's name, else "NVTX".
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "inject/inject.h"

namespace fxprof::inject {

namespace {

enum : uint32_t { kModuleCore = 1, kModuleCore2 = 5, kExportTableCallbacks = 1 };

enum CoreId : unsigned {
  kMarkEx = 1,
  kMarkA,
  kMarkW,
  kRangeStartEx,
  kRangeStartA,
  kRangeStartW,
  kRangeEnd,
  kRangePushEx,
  kRangePushA,
  kRangePushW,
  kRangePop,
  kNameCategoryA,
  kNameCategoryW,
  kNameOsThreadA,
  kNameOsThreadW,
  kCoreSize
};

enum Core2Id : unsigned {
  kDomainMarkEx = 1,
  kDomainRangeStartEx,
  kDomainRangeEnd,
  kDomainRangePushEx,
  kDomainRangePop,
  kDomainResourceCreate,
  kDomainResourceDestroy,
  kDomainNameCategoryA,
  kDomainNameCategoryW,
  kDomainRegisterStringA,
  kDomainRegisterStringW,
  kDomainCreateA,
  kDomainCreateW,
  kDomainDestroy,
  kInitialize,
  kCore2Size
};

using Fn = void (*)();
struct ExportTableCallbacks {
  size_t struct_size;
  int (*get_module_function_table)(uint32_t module, Fn*** table, unsigned* size);
};
using GetExportTable = const void* (*)(uint32_t id);

enum : int32_t { kMessageAscii = 1, kMessageUnicode = 2, kMessageRegistered = 3 };

// nvtxEventAttributes_t (version 2 and 3 share this layout; `size` says how much of it the client has).
struct EventAttributes {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;
  uint64_t payload;
  int32_t message_type;
  const void* message;  // const char*, const wchar_t* or a registered string (ours: a kept const char*)
};
static_assert(sizeof(EventAttributes) == 48);

// Domains and registered strings are kept names (inject.h keep()); the default domain is nullptr.
using Domain = const char*;

std::mutex g_categories_lock;  // trivially destructible: usable until the end
std::map<std::pair<Domain, uint32_t>, std::string>& categories() {
  return immortal<std::map<std::pair<Domain, uint32_t>, std::string>>();
}

std::atomic<uint64_t> g_next_range{1};

// The marker's category and name of an event.
struct Event {
  char category[48];
  char name[kNameMax];
};

void category_of(Domain d, uint32_t category, char* out, size_t size) {
  if (category != 0) {
    std::lock_guard lock(g_categories_lock);
    auto it = categories().find({d, category});
    if (it != categories().end()) {
      snprintf(out, size, "%s", it->second.c_str());
      return;
    }
  }
  snprintf(out, size, "%s", d ? d : "NVTX");
}

void message_of(int32_t type, const void* message, char* out, size_t size) {
  out[0] = '\0';
  if (!message) return;
  if (type == kMessageAscii || type == kMessageRegistered)
    snprintf(out, size, "%s", static_cast<const char*>(message));
  else if (type == kMessageUnicode)
    narrow(static_cast<const wchar_t*>(message), out, size);
}

Event event_of(Domain d, const EventAttributes* a) {
  Event e{};
  if (!a || a->size < sizeof(EventAttributes)) {
    category_of(d, 0, e.category, sizeof e.category);
    return e;
  }
  category_of(d, a->category, e.category, sizeof e.category);
  message_of(a->message_type, a->message, e.name, sizeof e.name);
  return e;
}

Event event_of(const char* ascii) {
  Event e{};
  category_of(nullptr, 0, e.category, sizeof e.category);
  message_of(kMessageAscii, ascii, e.name, sizeof e.name);
  return e;
}

Event event_of(const wchar_t* wide) {
  Event e{};
  category_of(nullptr, 0, e.category, sizeof e.category);
  message_of(kMessageUnicode, wide, e.name, sizeof e.name);
  return e;
}

uint64_t start_event(const Event& e) {
  const uint64_t id = g_next_range.fetch_add(1, std::memory_order_relaxed);
  start(id, e.category, e.name);
  return id;
}

void name_category(Domain d, uint32_t category, const char* name) {
  std::lock_guard lock(g_categories_lock);
  categories()[{d, category}] = name ? name : "";
}

void name_thread(uint32_t tid, const char* name) {
  thread_name(tid == static_cast<uint32_t>(syscall(SYS_gettid)) ? 0 : tid, name);
}

// The callbacks, with NVTX's signatures.
void mark(const Event& e) { instant(e.category, e.name); }
void mark_ex(const EventAttributes* a) {
  if (recording()) mark(event_of(nullptr, a));
}
void mark_a(const char* m) {
  if (recording()) mark(event_of(m));
}
void mark_w(const wchar_t* m) {
  if (recording()) mark(event_of(m));
}
uint64_t range_start_ex(const EventAttributes* a) {
  return recording() ? start_event(event_of(nullptr, a)) : 0;
}
uint64_t range_start_a(const char* m) { return recording() ? start_event(event_of(m)) : 0; }
uint64_t range_start_w(const wchar_t* m) { return recording() ? start_event(event_of(m)) : 0; }
void range_end(uint64_t id) { end(id); }
int range_push_ex(const EventAttributes* a) {
  if (!recording()) return -1;
  const Event e = event_of(nullptr, a);
  return push(nullptr, e.category, e.name);
}
int range_push_a(const char* m) { return recording() ? push(nullptr, "NVTX", event_of(m).name) : -1; }
int range_push_w(const wchar_t* m) { return recording() ? push(nullptr, "NVTX", event_of(m).name) : -1; }
int range_pop() { return pop(nullptr); }
void name_category_a(uint32_t c, const char* name) { name_category(nullptr, c, name); }
void name_category_w(uint32_t c, const wchar_t* name) {
  char n[kNameMax];
  narrow(name, n, sizeof n);
  name_category(nullptr, c, n);
}
void name_os_thread_a(uint32_t tid, const char* name) { name_thread(tid, name); }
void name_os_thread_w(uint32_t tid, const wchar_t* name) {
  char n[kNameMax];
  narrow(name, n, sizeof n);
  name_thread(tid, n);
}

void domain_mark_ex(Domain d, const EventAttributes* a) {
  if (!recording()) return;
  const Event e = event_of(d, a);
  instant(e.category, e.name);
}
uint64_t domain_range_start_ex(Domain d, const EventAttributes* a) {
  return recording() ? start_event(event_of(d, a)) : 0;
}
void domain_range_end(Domain, uint64_t id) { end(id); }
int domain_range_push_ex(Domain d, const EventAttributes* a) {
  if (!recording()) return -1;
  const Event e = event_of(d, a);
  return push(d, e.category, e.name);
}
int domain_range_pop(Domain d) { return pop(d); }
void domain_name_category_a(Domain d, uint32_t c, const char* name) { name_category(d, c, name); }
void domain_name_category_w(Domain d, uint32_t c, const wchar_t* name) {
  char n[kNameMax];
  narrow(name, n, sizeof n);
  name_category(d, c, n);
}
const char* domain_register_string_a(Domain, const char* s) { return keep(s); }
const char* domain_register_string_w(Domain, const wchar_t* s) {
  char n[kNameMax];
  narrow(s, n, sizeof n);
  return keep(n);
}
Domain domain_create_a(const char* name) { return keep(name); }
Domain domain_create_w(const wchar_t* name) {
  char n[kNameMax];
  narrow(name, n, sizeof n);
  return keep(n);
}
void domain_destroy(Domain) {}  // its name stays: ranges still open may name it
void initialize(const void*) {}

template <class F>
Fn fn(F f) {
  return reinterpret_cast<Fn>(f);
}

// Sets the client's pointer of each callback we implement (the others keep the client's no-op).
bool fill(const ExportTableCallbacks* cb, uint32_t module, const Fn* ours, unsigned count) {
  Fn** table = nullptr;
  unsigned size = 0;
  if (!cb->get_module_function_table(module, &table, &size) || !table) return false;
  for (unsigned id = 1; id < size && id < count; ++id)
    if (table[id] && ours[id]) *table[id] = ours[id];
  return true;
}

}  // namespace

}  // namespace fxprof::inject

using namespace fxprof::inject;

// 1 on success (the client then calls through the pointers set), 0 to be unloaded.
FXPROF_INJECT_API int InitializeInjectionNvtx2(GetExportTable get_export_table) {
  if (!get_export_table) return 0;
  const auto* cb = static_cast<const ExportTableCallbacks*>(get_export_table(kExportTableCallbacks));
  if (!cb || cb->struct_size < sizeof(ExportTableCallbacks) || !cb->get_module_function_table) return 0;
  Fn core[kCoreSize] = {};
  core[kMarkEx] = fn(mark_ex);
  core[kMarkA] = fn(mark_a);
  core[kMarkW] = fn(mark_w);
  core[kRangeStartEx] = fn(range_start_ex);
  core[kRangeStartA] = fn(range_start_a);
  core[kRangeStartW] = fn(range_start_w);
  core[kRangeEnd] = fn(range_end);
  core[kRangePushEx] = fn(range_push_ex);
  core[kRangePushA] = fn(range_push_a);
  core[kRangePushW] = fn(range_push_w);
  core[kRangePop] = fn(range_pop);
  core[kNameCategoryA] = fn(name_category_a);
  core[kNameCategoryW] = fn(name_category_w);
  core[kNameOsThreadA] = fn(name_os_thread_a);
  core[kNameOsThreadW] = fn(name_os_thread_w);
  Fn core2[kCore2Size] = {};
  core2[kDomainMarkEx] = fn(domain_mark_ex);
  core2[kDomainRangeStartEx] = fn(domain_range_start_ex);
  core2[kDomainRangeEnd] = fn(domain_range_end);
  core2[kDomainRangePushEx] = fn(domain_range_push_ex);
  core2[kDomainRangePop] = fn(domain_range_pop);
  core2[kDomainNameCategoryA] = fn(domain_name_category_a);
  core2[kDomainNameCategoryW] = fn(domain_name_category_w);
  core2[kDomainRegisterStringA] = fn(domain_register_string_a);
  core2[kDomainRegisterStringW] = fn(domain_register_string_w);
  core2[kDomainCreateA] = fn(domain_create_a);
  core2[kDomainCreateW] = fn(domain_create_w);
  core2[kDomainDestroy] = fn(domain_destroy);
  core2[kInitialize] = fn(initialize);
  // A client without one of the modules still gets the other.
  const bool has_core = fill(cb, kModuleCore, core, kCoreSize);
  const bool has_core2 = fill(cb, kModuleCore2, core2, kCore2Size);
  return has_core || has_core2 ? 1 : 0;
}
