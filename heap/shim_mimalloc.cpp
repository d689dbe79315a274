// fxprof heap shim: mimalloc's own API (mi_malloc, mi_free...) when the program calls it in libmimalloc.so.
//
// A program that links mimalloc as a shared library and calls its mi_* functions bypasses malloc, so the
// shim saw 1,001 of 102,002 allocations (issue 36). The preloaded shim comes before libmimalloc.so in
// symbol lookup, so defining the same names here puts each call through the shim, which forwards it to
// the next definition (dlsym(RTLD_NEXT)) and records it: the interposition that malloc gets, at its cost,
// without uprobes or root. An executable that links mimalloc statically defines these names itself and
// wins the lookup: heap/allocators.cpp finds it and uprobes record it instead.
//
// Without libmimalloc.so (a program that looks the names up to test for mimalloc finds these), each call
// goes to the C library's equivalent. Calls mimalloc makes to its own entry points count once, as the
// program's call (heap/shim_hooks.h). The mi_heap_* API is forwarded uncounted (its blocks' frees are ignored
// as unknown): it takes a heap only mimalloc has.
#include <dlfcn.h>
#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "heap/shim_hooks.h"

namespace {

using fxprof::heap::shim::hook_alloc;
using fxprof::heap::shim::hook_free;
using fxprof::heap::shim::hooks_ready;
using fxprof::heap::shim::inner_calls;
using fxprof::heap::shim::InnerCall;

// The next definition of `name` (libmimalloc.so's), looked up once; nullptr where there is none.
template <class Fn>
Fn next_of(std::atomic<void*>& slot, const char* name) {
  void* f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = dlsym(RTLD_NEXT, name);
    if (!f) f = reinterpret_cast<void*>(uintptr_t{1});  // none: looked up once
    slot.store(f, std::memory_order_release);
  }
  return f == reinterpret_cast<void*>(uintptr_t{1}) ? nullptr : reinterpret_cast<Fn>(f);
}

// Whether this call is the program's own (not mimalloc's call to its own entry point, not the shim's
// bootstrap): only those are recorded.
bool program_call() { return inner_calls == 0 && hooks_ready(); }

// Calls mimalloc's `name` through `call` (or `fallback()` without mimalloc) and records the block of `size`
// bytes (size_of(block) when size is kSizeOfResult) when the program made the call itself.
constexpr size_t kSizeOfResult = SIZE_MAX;
template <class Fn, class Call, class Fallback>
void* allocate(std::atomic<void*>& slot, const char* name, size_t size, Call call, Fallback fallback) {
  const bool outer = program_call();
  void* p;
  {
    InnerCall inner;
    Fn next = next_of<Fn>(slot, name);
    p = next ? call(next) : fallback();
  }
  if (size == kSizeOfResult) size = p ? std::strlen(static_cast<char*>(p)) + 1 : 0;
  if (outer) hook_alloc(p, size);
  return p;
}

void* zeroed(void* p, size_t n) {
  if (p) std::memset(p, 0, n);
  return p;
}

bool product(size_t count, size_t size, size_t& total) {
  if (!__builtin_mul_overflow(count, size, &total)) return true;
  errno = ENOMEM;
  return false;
}

// Frees `p` through mimalloc's `name` (or free), recorded first as the program's free.
template <class Fn, class... Args>
void forward_free(std::atomic<void*>& slot, const char* name, void* p, Args... args) {
  if (p && program_call()) hook_free(p);
  InnerCall inner;
  if (auto next = next_of<Fn>(slot, name))
    next(p, args...);
  else
    free(p);
}

}  // namespace

extern "C" {

#define FXPROF_API __attribute__((visibility("default")))
using Sized = void* (*)(size_t);
using Pair = void* (*)(size_t, size_t);
using Triple = void* (*)(size_t, size_t, size_t);
FXPROF_API void mi_free(void* p);

FXPROF_API void* mi_malloc(size_t n) {
  static std::atomic<void*> slot;
  return allocate<Sized>(
      slot, "mi_malloc", n, [&](Sized f) { return f(n); }, [&] { return malloc(n); });
}

FXPROF_API void* mi_zalloc(size_t n) {
  static std::atomic<void*> slot;
  return allocate<Sized>(
      slot, "mi_zalloc", n, [&](Sized f) { return f(n); }, [&] { return calloc(1, n); });
}

FXPROF_API void* mi_new(size_t n) {  // (mimalloc-new-delete.h's operator new)
  static std::atomic<void*> slot;
  return allocate<Sized>(
      slot, "mi_new", n, [&](Sized f) { return f(n); }, [&] { return malloc(n); });
}

FXPROF_API void* mi_new_nothrow(size_t n) {
  static std::atomic<void*> slot;
  return allocate<Sized>(
      slot, "mi_new_nothrow", n, [&](Sized f) { return f(n); }, [&] { return malloc(n); });
}

FXPROF_API void* mi_valloc(size_t n) {
  static std::atomic<void*> slot;
  return allocate<Sized>(
      slot, "mi_valloc", n, [&](Sized f) { return f(n); }, [&] { return valloc(n); });
}

FXPROF_API void* mi_calloc(size_t count, size_t size) {
  static std::atomic<void*> slot;
  size_t n;
  if (!product(count, size, n)) return nullptr;
  return allocate<Pair>(
      slot, "mi_calloc", n, [&](Pair f) { return f(count, size); }, [&] { return calloc(count, size); });
}

FXPROF_API void* mi_mallocn(size_t count, size_t size) {
  static std::atomic<void*> slot;
  size_t n;
  if (!product(count, size, n)) return nullptr;
  return allocate<Pair>(
      slot, "mi_mallocn", n, [&](Pair f) { return f(count, size); }, [&] { return malloc(n); });
}

FXPROF_API void* mi_new_n(size_t count, size_t size) {
  static std::atomic<void*> slot;
  size_t n;
  if (!product(count, size, n)) return nullptr;
  return allocate<Pair>(
      slot, "mi_new_n", n, [&](Pair f) { return f(count, size); }, [&] { return malloc(n); });
}

FXPROF_API void* mi_malloc_aligned(size_t n, size_t align) {
  static std::atomic<void*> slot;
  return allocate<Pair>(
      slot, "mi_malloc_aligned", n, [&](Pair f) { return f(n, align); }, [&] { return memalign(align, n); });
}

FXPROF_API void* mi_new_aligned(size_t n, size_t align) {
  static std::atomic<void*> slot;
  return allocate<Pair>(
      slot, "mi_new_aligned", n, [&](Pair f) { return f(n, align); }, [&] { return memalign(align, n); });
}

FXPROF_API void* mi_zalloc_aligned(size_t n, size_t align) {
  static std::atomic<void*> slot;
  return allocate<Pair>(
      slot, "mi_zalloc_aligned", n, [&](Pair f) { return f(n, align); },
      [&] { return zeroed(memalign(align, n), n); });
}

// (mi_memalign and mi_aligned_alloc take the alignment first.)
FXPROF_API void* mi_memalign(size_t align, size_t n) {
  static std::atomic<void*> slot;
  return allocate<Pair>(
      slot, "mi_memalign", n, [&](Pair f) { return f(align, n); }, [&] { return memalign(align, n); });
}

FXPROF_API void* mi_aligned_alloc(size_t align, size_t n) {
  static std::atomic<void*> slot;
  return allocate<Pair>(
      slot, "mi_aligned_alloc", n, [&](Pair f) { return f(align, n); }, [&] { return memalign(align, n); });
}

FXPROF_API void* mi_calloc_aligned(size_t count, size_t size, size_t align) {
  static std::atomic<void*> slot;
  size_t n;
  if (!product(count, size, n)) return nullptr;
  return allocate<Triple>(
      slot, "mi_calloc_aligned", n, [&](Triple f) { return f(count, size, align); },
      [&] { return zeroed(memalign(align, n), n); });
}

FXPROF_API int mi_posix_memalign(void** out, size_t align, size_t n) {
  using Fn = int (*)(void**, size_t, size_t);
  static std::atomic<void*> slot;
  int rc = 0;
  allocate<Fn>(
      slot, "mi_posix_memalign", n,
      [&](Fn f) {
        rc = f(out, align, n);
        return rc == 0 ? *out : nullptr;
      },
      [&] {
        rc = posix_memalign(out, align, n);
        return rc == 0 ? *out : nullptr;
      });
  return rc;
}

FXPROF_API char* mi_strdup(const char* s) {
  using Fn = char* (*)(const char*);
  static std::atomic<void*> slot;
  return static_cast<char*>(allocate<Fn>(
      slot, "mi_strdup", kSizeOfResult, [&](Fn f) { return f(s); }, [&] { return strdup(s); }));
}

FXPROF_API char* mi_strndup(const char* s, size_t max) {
  using Fn = char* (*)(const char*, size_t);
  static std::atomic<void*> slot;
  return static_cast<char*>(allocate<Fn>(
      slot, "mi_strndup", kSizeOfResult, [&](Fn f) { return f(s, max); }, [&] { return strndup(s, max); }));
}

// realloc: a free of the old block and an allocation of the new one, as the shim's realloc counts it.
FXPROF_API void* mi_realloc(void* old, size_t n) {
  using Fn = void* (*)(void*, size_t);
  static std::atomic<void*> slot;
  if (old && program_call()) hook_free(old);
  return allocate<Fn>(
      slot, "mi_realloc", n, [&](Fn f) { return f(old, n); }, [&] { return realloc(old, n); });
}

FXPROF_API void* mi_reallocn(void* old, size_t count, size_t size) {
  size_t n;
  if (!product(count, size, n)) return nullptr;
  return mi_realloc(old, n);
}

FXPROF_API void* mi_reallocarray(void* old, size_t count, size_t size) {
  return mi_reallocn(old, count, size);
}

FXPROF_API void* mi_reallocf(void* old, size_t n) {  // frees `old` when it fails
  void* p = mi_realloc(old, n);
  if (!p && old && n != 0) mi_free(old);
  return p;
}

FXPROF_API void mi_free(void* p) {
  static std::atomic<void*> slot;
  forward_free<void (*)(void*)>(slot, "mi_free", p);
}

FXPROF_API void mi_free_size(void* p, size_t n) {
  static std::atomic<void*> slot;
  forward_free<void (*)(void*, size_t)>(slot, "mi_free_size", p, n);
}

FXPROF_API void mi_free_aligned(void* p, size_t align) {
  static std::atomic<void*> slot;
  forward_free<void (*)(void*, size_t)>(slot, "mi_free_aligned", p, align);
}

FXPROF_API void mi_free_size_aligned(void* p, size_t n, size_t align) {
  static std::atomic<void*> slot;
  forward_free<void (*)(void*, size_t, size_t)>(slot, "mi_free_size_aligned", p, n, align);
}

}  // extern "C"
