// The ranges, marks and thread names NVTX and ITT hand over, as marker-file lines (inject.h).
#include <pthread.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "fxprof/markers.h"
#include "inject/inject.h"

namespace fxprof::inject {

namespace {

void copy(char* out, size_t size, const char* s) {
  size_t n = s ? strnlen(s, size - 1) : 0;
  if (n) memcpy(out, s, n);
  out[n] = '\0';
}

struct Open {
  const void* scope;
  uint64_t start;
  char category[48];
  char name[kNameMax];
};

// Per thread: plain data (a dlopen'ed library's thread-locals without constructors or destructors).
struct Stack {
  int depth;
  Open open[kMaxDepth];
};
__thread Stack t_stack;

struct Started {
  uint64_t start;
  std::string category, name;
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

struct Lock {
  Lock() { pthread_mutex_lock(&g_lock); }
  ~Lock() { pthread_mutex_unlock(&g_lock); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
};

void write_fields(uint64_t from, uint64_t to, const char* category, const char* name, int instant,
                  const Field* f, int n) {
  fxprof_field fields[8];
  if (n > 8) n = 8;
  for (int i = 0; i < n; ++i)
    fields[i] = f[i].str ? fxprof_str(f[i].key, f[i].str) : fxprof_num(f[i].key, f[i].num);
  fxprof__line(from, to, category, name, instant, fields, n);
}

// The time a range starts, 0 when not recording: read before the thread's first marker makes its file (which
// takes a while).
uint64_t start_time() {
  const fxprof_thread& t = fxprof__thread;
  if (t.state == 2 && t.gen == fxprof__process.gen) return 0;
  const uint64_t now = fxprof_now();
  return fxprof__on() ? now : 0;
}

}  // namespace

bool recording() { return fxprof__on() != 0; }
uint64_t now_ns() { return fxprof_now(); }

void narrow(const wchar_t* s, char* out, size_t size) {
  size_t o = 0;
  for (; s && *s && o + 4 < size; ++s) {
    const auto c = static_cast<uint32_t>(*s);
    if (c < 0x80) {
      out[o++] = static_cast<char>(c);
    } else if (c < 0x800) {
      out[o++] = static_cast<char>(0xC0 | (c >> 6));
      out[o++] = static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out[o++] = static_cast<char>(0xE0 | (c >> 12));
      out[o++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out[o++] = static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out[o++] = static_cast<char>(0xF0 | ((c >> 18) & 0x07));
      out[o++] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out[o++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out[o++] = static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  if (size) out[o] = '\0';
}

int push(const void* scope, const char* category, const char* name) {
  const uint64_t now = start_time();
  if (!now) return -1;
  Stack& s = t_stack;
  if (s.depth < kMaxDepth) {
    Open& o = s.open[s.depth];
    o.scope = scope;
    o.start = now;
    copy(o.category, sizeof o.category, category);
    copy(o.name, sizeof o.name, name);
  }
  return s.depth++;
}

int pop(const void* scope) {
  if (!recording()) return -1;
  Stack& s = t_stack;
  if (s.depth == 0) return -1;
  if (s.depth > kMaxDepth) return --s.depth;  // a range deeper than kept: nothing to write
  // The innermost open range of this scope (scopes' ranges may interleave on one thread).
  int i = s.depth - 1;
  while (i >= 0 && s.open[i].scope != scope) --i;
  if (i < 0) return -1;
  const uint64_t now = fxprof_now();
  fxprof__line(s.open[i].start, now, s.open[i].category, s.open[i].name, 0, nullptr, 0);
  memmove(&s.open[i], &s.open[i + 1], sizeof(Open) * static_cast<size_t>(s.depth - 1 - i));
  return --s.depth;
}

void start(uint64_t key, const char* category, const char* name, uint64_t at) {
  if (!at) at = start_time();
  if (!at || !recording()) return;
  Started st{at, category ? category : "", name ? name : ""};
  if (st.name.size() >= kNameMax) st.name.resize(kNameMax - 1);
  Lock lock;
  auto& open = immortal<std::unordered_map<uint64_t, Started>>();
  if (open.size() < kMaxOpen) open[key] = std::move(st);
}

void end(uint64_t key, uint64_t at) {
  if (!recording()) return;
  const uint64_t now = at ? at : fxprof_now();
  Started st;
  {
    Lock lock;
    auto& open = immortal<std::unordered_map<uint64_t, Started>>();
    auto it = open.find(key);
    if (it == open.end()) return;
    st = std::move(it->second);
    open.erase(it);
  }
  fxprof__line(st.start, now < st.start ? st.start : now, st.category.c_str(), st.name.c_str(), 0, nullptr,
               0);
}

void interval(const char* category, const char* name, uint64_t start_ns, uint64_t end_ns) {
  if (recording() && start_ns != 0)
    fxprof__line(start_ns, end_ns < start_ns ? start_ns : end_ns, category, name, 0, nullptr, 0);
}

void instant(const char* category, const char* name, const Field* f, int n) {
  if (!recording()) return;
  const uint64_t now = fxprof_now();
  write_fields(now, now, category, name, 1, f, n);
}

// A thread name is an instant line of the reserved category ".thread_name" (recorder/markers.h), with the
// named thread's id when it is not the writer.
void thread_name(uint32_t tid, const char* name) {
  if (!recording() || !name || !*name) return;
  const Field f{"tid", nullptr, static_cast<double>(tid)};
  instant(".thread_name", name, &f, tid ? 1 : 0);
}

const char* keep(const char* s) {
  if (!s) s = "";
  Lock lock;
  auto& kept = immortal<std::unordered_set<std::string>>();
  return kept.emplace(s).first->c_str();
}

}  // namespace fxprof::inject
