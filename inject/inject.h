// fxprof inject: libfxprof_inject.so, the library NVIDIA's NVTX and Intel's ITT load into a program when
// their environment variable names it (NVTX_INJECTION64_PATH, INTEL_LIBITTNOTIFY64; `fxprof record` sets
// both for the program it launches, recorder/markers_env.h). Their ranges, marks and thread names become
// lines of the fxprof marker files (include/fxprof/markers.h, the same writer and file the header uses:
// FXPROF_MARKERS/fxprof-markers-PID-TID-N.txt, one per thread), which the recorder's marker tracker reads
// (recorder/markers.h). Without FXPROF_MARKERS every call returns after one test of a thread-local.
//
//  - nvtx.cpp: InitializeInjectionNvtx2, the NVTX client's entry point; fills the CORE and CORE2 function
//    tables (push/pop, start/end, marks, categories, thread names, domains, registered strings).
//  - itt.cpp: __itt_api_init, what ittnotify's static part (in the program, libomp, oneTBB) calls with its
//    table of function pointers; tasks, frames, regions, events, marks, markers, domains, string handles,
//    thread names.
//  - ranges.cpp (this header): the shared parts. Push/pop ranges nest per thread (a stack of copies of
//    their names: the program's strings need not outlive the call); start/end ranges (which may end on
//    another thread) are kept by id in a table and written by the thread that ends them; a thread name is
//    a line with the ".thread_name" extra (recorder/markers.h).
// Names longer than kNameMax bytes are cut; at most kMaxDepth open push ranges per thread and kMaxOpen
// start/end ranges at a time are kept (more are counted nowhere: they are not written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#define FXPROF_INJECT_API extern "C" __attribute__((visibility("default")))

namespace fxprof::inject {

inline constexpr size_t kNameMax = 160;
inline constexpr int kMaxDepth = 64;
inline constexpr size_t kMaxOpen = 1 << 16;

// Whether this thread's markers are written (FXPROF_MARKERS set and its file made).
bool recording();
uint64_t now_ns();

// A name given as UTF-32 (wchar_t) into `out` as UTF-8.
void narrow(const wchar_t* s, char* out, size_t size);

// One field of a marker: a number or a string.
struct Field {
  const char* key;
  const char* str;  // nullptr: the number
  double num;
};

// Push/pop ranges of this thread; `scope` separates independent stacks (an NVTX domain, an ITT domain):
// pop ends the innermost open range of that scope. Both return the depth (NVTX's push/pop result), or -1.
int push(const void* scope, const char* category, const char* name);
int pop(const void* scope);

// Start/end ranges by key (unique while open): the end writes it on the calling thread. end() of an unknown
// key does nothing; `at` 0 means now.
void start(uint64_t key, const char* category, const char* name, uint64_t at = 0);
void end(uint64_t key, uint64_t at = 0);

// A whole interval, an instant marker, a thread's name (tid 0: the calling thread).
void interval(const char* category, const char* name, uint64_t start_ns, uint64_t end_ns);
void instant(const char* category, const char* name, const Field* f = nullptr, int n = 0);
void thread_name(uint32_t tid, const char* name);

// An object the program's threads may use until its last instruction: built on first use, never destroyed
// (a static destructor would run while other threads still end ranges).
template <class T>
T& immortal() {
  alignas(T) static unsigned char storage[sizeof(T)];
  static T* object = ::new (storage) T();
  return *object;
}

// A string kept for the life of the process (domain and registered names): interned, never freed.
const char* keep(const char* s);

}  // namespace fxprof::inject
