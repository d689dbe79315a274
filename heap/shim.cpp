// fxprof heap shim: the LD_PRELOAD library `fxprof record --heap` puts into the recorded program.
//
// Design:
//  - Wraps the malloc family by calling the next definition (dlsym(RTLD_NEXT)); blocks are the real
//    allocator's, untouched, so malloc_usable_size and everything else stay right. dlsym itself may call
//    calloc before the real one is known: such early calls are served from a static bootstrap arena whose
//    blocks are never freed.
//  - A thread-local `busy` flag makes the recording reentrancy-safe: whatever the hook itself causes
//    (libunwind's first-use setup, a signal handler that allocates while the hook runs) goes straight to the
//    real allocator, unrecorded. The hook never allocates with malloc: its buffers are mmap'd.
//  - sampled mode: Poisson sampling by bytes (a per-thread countdown drawn from an exponential distribution
//    of mean --heap-rate); an allocation of size s is taken when the countdown crosses it (the recorder
//    weighs it s / (1 - exp(-s/rate)), the unbiased estimate). Which addresses are sampled is kept exactly
//    (SampledSet), so a free is reported for exactly the sampled blocks.
//  - The fast paths are what the program pays on every call, so they hold only what sampling needs:
//    malloc is the real call plus one subtraction from an initial-exec TLS integer (no reentrancy flag, no
//    thread-state pointer: a countdown of 0 sends a thread's first call, full mode's every call and a
//    finished thread's calls to the slow path, which sorts them out); free is one load from a bitmap of
//    sampled addresses. The bitmap is indexed by the address itself (16-byte granules, 128 MiB per turn, the
//    turn number mixed in), so a free touches the bitmap line of its neighbours: 1/128 of the cache lines
//    the allocator touches anyway, where a hashed index cost a cache miss per free in a large heap.
//    Measured on the 15 ns malloc+free loop of bench/heap.sh: 2.4x the bare loop with a double countdown
//    in the thread state, the guard flag and the checks on every call; about 1.1x now.
//  - full mode: every allocation and free.
//  - Stacks: libunwind's unw_backtrace (frame-pointer free, CFI based, with its own per-thread cache of
//    unwind info). Measured here on a 6-deep chain: ~0.5 us per backtrace after warm-up, against ~1.2 us for
//    _Unwind_Backtrace (libgcc) and no reliable result from frame pointers through Debian's libstdc++. Each
//    thread interns its stacks (heap/shim_stacks.h): a repeated call stack is sent once, a new one as the
//    frames it does not share with the thread's previous definition.
//  - Times: the TSC where it is invariant (see event_time; every chunk then carries clock pairs), as two
//    clock_gettime calls through kvm-clock were ~110 of the ~630 ns a malloc+free cost in full mode here.
//  - Transport: each thread fills a 4 KiB chunk and writes it with one write(2) to the pipe inherited through
//    FXPROF_HEAP_FD (see heap/wire.h). A full pipe blocks the program until the recorder reads: memory stays
//    bounded and nothing is dropped. A chunk that cannot be written is counted as lost in the next one that
//    is.
//  - The descriptor is the program's to close: each chunk goes out only while it is still the recorder's
//    pipe, and a recorder that died never kills the program (heap/shim_pipe.h).
//  - fork: the child starts with empty buffers and stack caches under its own pid; exec: the environment
//    keeps LD_PRELOAD, so the new program loads the shim again. _exit and _Exit (how a forked child that does
//    not exec usually leaves, running no destructors) flush every thread's chunk first.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "heap/shim_clock.h"
#include "heap/shim_frames.h"
#include "heap/shim_hooks.h"
#include "heap/shim_pipe.h"
#include "heap/shim_sampling.h"
#include "heap/shim_stacks.h"
#include "heap/wire.h"

namespace {

using fxprof::heap::wire::ChunkHeader;
using fxprof::heap::wire::Kind;
using fxprof::heap::wire::Record;
namespace wire = fxprof::heap::wire;

using MallocFn = void* (*)(size_t);
using FreeFn = void (*)(void*);
using CallocFn = void* (*)(size_t, size_t);
using ReallocFn = void* (*)(void*, size_t);
using MemalignFn = void* (*)(size_t, size_t);
using PosixMemalignFn = int (*)(void**, size_t, size_t);
using VallocFn = void* (*)(size_t);
using UsableFn = size_t (*)(void*);
using ExitFn = void (*)(int);

struct Real {
  MallocFn malloc;
  FreeFn free;
  CallocFn calloc;
  ReallocFn realloc;
  MemalignFn memalign;
  PosixMemalignFn posix_memalign;
  MemalignFn aligned_alloc;
  VallocFn valloc;
  VallocFn pvalloc;
  UsableFn usable;
  ExitFn exit_now;   // _exit
  ExitFn exit_now2;  // _Exit
};
Real real;
std::atomic<int> init_state{0};  // 0 = not started, 1 = resolving (dlsym running), 2 = ready

// Bootstrap arena for the calls dlsym makes before the real functions are known.
alignas(64) char boot_arena[64 * 1024];
std::atomic<size_t> boot_used{0};
inline bool in_boot(const void* p) {
  return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(boot_arena) < sizeof boot_arena;
}
void* boot_alloc(size_t n, size_t align = 16) {
  size_t off = boot_used.load();
  for (;;) {
    size_t start = (off + align - 1) & ~(align - 1);
    if (start + n > sizeof boot_arena) return nullptr;
    if (boot_used.compare_exchange_weak(off, start + n)) return boot_arena + start;
  }
}

// Configuration, read once from the environment (getenv does not allocate).
bool full_mode = false;
double rate = 512 * 1024;
std::atomic<uint32_t> cur_pid{0};
uint64_t seed = 0;                      // FXPROF_HEAP_SEED (tests): sampling repeats from run to run
std::atomic<uint64_t> thread_count{0};  // threads seeded so far (with `seed`)
uint64_t forks = 0;                     // forks so far: each child samples differently
std::atomic<uint64_t> lost_chunks{0};

// Sampled blocks: a bitmap of addresses, the free fast path's filter (a set bit sends the free to the slow
// path; heap/shim_sampling.h). Null unless sampled mode records: then every free takes the slow path.
std::atomic<uint64_t>* sampled_bits = nullptr;
using fxprof::heap::shim::addr_bit;
using fxprof::heap::shim::clock_record;
using fxprof::heap::shim::event_time;
using fxprof::heap::shim::invariant_tsc;
using fxprof::heap::shim::kBitmapBits;
using fxprof::heap::shim::now_ns;
using fxprof::heap::shim::set_erase;
using fxprof::heap::shim::set_insert;
using fxprof::heap::shim::set_lock;
using fxprof::heap::shim::set_unlock;
using fxprof::heap::shim::use_tsc;

struct ThreadState {
  std::atomic<int> lock{0};  // taken by the owner while writing, by the exit flusher to flush
  uint32_t tid = 0;
  uint32_t pid = 0;
  uint32_t fill = 0;  // bytes of records in buf
  uint64_t rng = 0;
  alignas(16) char buf[wire::kChunkMax];
  fxprof::heap::shim::StackCache stacks;  // (the mapping's zero pages until used)
};

constexpr size_t kMaxThreads = 4096;
std::atomic<ThreadState*> registry[kMaxThreads];

// The per-thread variables, together so that the fast path finds them with one TLS offset.
struct Tls {
  int64_t countdown = 0;  // bytes left before the next sample; <= 0 sends malloc to the slow path
  // The last sampled block, the countdown after it and the frees then: at its free, the same countdown and
  // one more free mean the thread allocated and freed nothing else since (a temporary, as heaptrack counts).
  uint64_t last_sampled = 0, frees = 0, frees_then = 0;  // frees: so far (sampled mode)
  int64_t after_sample = 0;
  int busy = 0;
  bool done = false;  // the thread's exit handler ran: later calls go unrecorded
  ThreadState* state = nullptr;
};
__attribute__((tls_model("initial-exec"))) thread_local Tls tls;
constexpr int64_t kNever = INT64_MAX;  // a countdown for threads and processes that record nothing
pthread_key_t exit_key;

int64_t next_countdown(ThreadState& s);

bool write_all(const void* data, size_t n) { return fxprof::heap::shim::pipe_write(data, n); }
using fxprof::heap::shim::sending;

// Records go after the chunk header's place in buf, leaving room for the closing Clock record.
constexpr uint32_t kHeader = sizeof(ChunkHeader);
constexpr uint32_t kRoom = wire::kChunkMax - kHeader - static_cast<uint32_t>(sizeof(Record));

// Sends the thread's chunk (caller holds s.lock).
void flush_locked(ThreadState& s) {
  if (s.fill == 0) return;
  int saved = errno;
  if (use_tsc) {
    Record c = clock_record();
    std::memcpy(s.buf + kHeader + s.fill, &c, sizeof c);
    s.fill += sizeof c;
  }
  ChunkHeader h{wire::kMagic, s.pid, s.tid, s.fill};
  std::memcpy(s.buf, &h, sizeof h);
  if (!write_all(s.buf, sizeof h + s.fill)) lost_chunks.fetch_add(1, std::memory_order_relaxed);
  s.fill = 0;
  errno = saved;
}

void put(ThreadState& s, const void* data, uint32_t n) {
  if (s.fill + n > kRoom) flush_locked(s);
  if (s.fill == 0 && use_tsc) {  // a chunk of TSC times opens with a Clock record
    Record c = clock_record();
    std::memcpy(s.buf + kHeader, &c, sizeof c);
    s.fill = sizeof c;
  }
  std::memcpy(s.buf + kHeader + s.fill, data, n);
  s.fill += n;
}

// The thread's first chunk, before its first event is timed (heap/wire.h): once the write returns, a chunk
// another thread closes later is behind this one in the pipe, so the recorder knows this thread before it
// sees any event later than this thread's first.
void send_hello(const ThreadState& s) {
  struct {
    ChunkHeader h;
    Record c;
  } msg{{wire::kMagic, s.pid, s.tid, use_tsc ? uint32_t{sizeof(Record)} : 0}, {}};
  if (use_tsc) msg.c = clock_record();
  const int saved = errno;
  if (!write_all(&msg, sizeof msg.h + msg.h.bytes)) lost_chunks.fetch_add(1, std::memory_order_relaxed);
  errno = saved;
}

void unregister(ThreadState* s) {
  for (auto& slot : registry) {
    ThreadState* expected = s;
    if (slot.compare_exchange_strong(expected, nullptr)) return;
  }
}

void release_state(ThreadState* s) {
  while (s->lock.exchange(1, std::memory_order_acquire) != 0) {
  }
  const Record end{static_cast<uint8_t>(Kind::End), {}, 0, 0, 0, 0};  // the thread sends nothing more
  put(*s, &end, sizeof end);
  flush_locked(*s);
  unregister(s);
  munmap(s, sizeof(ThreadState));
}

void on_thread_exit(void*) {
  ++tls.busy;
  if (ThreadState* s = tls.state) {
    tls.state = nullptr;
    release_state(s);
  }
  tls.done = true;  // later calls of this thread (other TLS destructors) go unrecorded
  tls.countdown = kNever;
  --tls.busy;
}

// The thread's state, made on its first recorded call (which draws its first countdown).
ThreadState* thread_state() {
  if (tls.state) return tls.state;
  if (tls.done) return nullptr;
  void* m = mmap(nullptr, sizeof(ThreadState), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* s = new (m) ThreadState;  // default-initialised: the cache stays the mapping's zero pages until used
  s->tid = static_cast<uint32_t>(syscall(SYS_gettid));
  s->pid = cur_pid.load(std::memory_order_relaxed);
  s->rng =
      fxprof::heap::shim::mix_seed(seed ? seed + (thread_count.fetch_add(1, std::memory_order_relaxed) << 32)
                                        : now_ns() ^ (uint64_t{s->tid} << 32));
  tls.countdown = full_mode ? 0 : next_countdown(*s);
  tls.state = s;
  for (auto& slot : registry) {
    ThreadState* expected = nullptr;
    if (slot.compare_exchange_strong(expected, s)) break;
  }
  pthread_setspecific(exit_key, s);  // keys below 32 need no allocation
  if (sending()) send_hello(*s);
  return s;
}

int64_t next_countdown(ThreadState& s) { return fxprof::heap::shim::exponential_draw(s.rng, rate); }

// Interns a call stack (the caller's frames, leaf first) for this thread; returns its id (sending the
// definition on first use).
uint32_t intern_stack(ThreadState& s, void* const* frames, uint32_t count) {
  const auto [id, fresh] = s.stacks.find(fxprof::heap::shim::stack_hash(frames, count));
  if (!fresh) return id;
  // Only the inner frames: the outer ones are the thread's previous definition's (heap/wire.h).
  const uint32_t shared = s.stacks.share_outer(frames, count);
  const uint32_t inner = count - shared;
  const Record def{static_cast<uint8_t>(Kind::StackDef), {}, id, 0, inner, shared};
  const uint32_t bytes = sizeof def + inner * 8;
  if (s.fill + bytes + sizeof(Record) > kRoom) flush_locked(s);  // with an opening Clock record
  put(s, &def, sizeof def);
  put(s, frames, inner * 8);  // (return addresses are 8 bytes, as the wire's)
  return id;
}

__attribute__((noinline)) void resolve() {
  int expected = 0;
  if (!init_state.compare_exchange_strong(expected, 1)) {
    while (init_state.load() != 2) {
    }  // another thread resolves; dlsym's own calls on that thread use the arena
    return;
  }
  real.malloc = reinterpret_cast<MallocFn>(dlsym(RTLD_NEXT, "malloc"));
  real.free = reinterpret_cast<FreeFn>(dlsym(RTLD_NEXT, "free"));
  real.calloc = reinterpret_cast<CallocFn>(dlsym(RTLD_NEXT, "calloc"));
  real.realloc = reinterpret_cast<ReallocFn>(dlsym(RTLD_NEXT, "realloc"));
  real.memalign = reinterpret_cast<MemalignFn>(dlsym(RTLD_NEXT, "memalign"));
  real.posix_memalign = reinterpret_cast<PosixMemalignFn>(dlsym(RTLD_NEXT, "posix_memalign"));
  real.aligned_alloc = reinterpret_cast<MemalignFn>(dlsym(RTLD_NEXT, "aligned_alloc"));
  real.valloc = reinterpret_cast<VallocFn>(dlsym(RTLD_NEXT, "valloc"));
  real.pvalloc = reinterpret_cast<VallocFn>(dlsym(RTLD_NEXT, "pvalloc"));
  real.usable = reinterpret_cast<UsableFn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  real.exit_now = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_exit"));
  real.exit_now2 = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_Exit"));

  fxprof::heap::shim::pipe_open();
  if (const char* m = getenv(wire::kModeEnv)) full_mode = std::strcmp(m, "full") == 0;
  if (const char* v = getenv(wire::kSeedEnv)) seed = strtoull(v, nullptr, 10);
  if (const char* r = getenv(wire::kRateEnv)) {
    double v = atof(r);
    if (v >= 1) rate = v;
  }
  cur_pid.store(static_cast<uint32_t>(getpid()));
  if (sending() && !full_mode) {
    void* m = mmap(nullptr, kBitmapBits / 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) sampled_bits = static_cast<std::atomic<uint64_t>*>(m);
  }
  fxprof::heap::shim::frames_init();
  use_tsc = invariant_tsc() && !getenv(wire::kNoTscEnv);
  init_state.store(2);
}

inline bool ready() {
  if (__builtin_expect(init_state.load(std::memory_order_acquire) == 2, 1)) return true;
  resolve();
  return init_state.load() == 2;
}

// Records an allocation whose size took the countdown to 0 or below (caller holds tls.busy).
void record_alloc(Tls& t, void* p, size_t size) {
  if (!sending()) {
    t.countdown = kNever;
    return;
  }
  const bool fresh = t.state == nullptr;
  ThreadState* s = thread_state();
  if (!s) {
    t.countdown = kNever;
    return;
  }
  if (full_mode) {
    t.countdown = 0;
  } else {
    if (fresh) {  // the thread's first countdown was drawn just now: this allocation counts against it
      t.countdown -= static_cast<int64_t>(size);
      if (t.countdown > 0) return;
    }
    t.countdown = next_countdown(*s);  // memoryless: a fresh draw after each sample is exact
  }
  if (!p) return;
  void* frames[wire::kMaxFrames + 8];
  const int n = unw_backtrace(frames, static_cast<int>(wire::kMaxFrames + 8));
  const int first = fxprof::heap::shim::own_frames(frames, n);
  if (fxprof::heap::shim::inside_probed(frames + first, n - first)) return;  // the uprobes count it
  if (!full_mode) {
    // The record carries the block's size; the recorder weighs it (heap/wire.h).
    set_lock();
    const bool kept = set_insert(reinterpret_cast<uintptr_t>(p));
    set_unlock();
    if (!kept) return;  // out of memory for the table: an unsampled block, not a leak
    size_t bit = addr_bit(p);
    sampled_bits[bit / 64].fetch_or(uint64_t{1} << (bit % 64), std::memory_order_relaxed);
    t.last_sampled = reinterpret_cast<uintptr_t>(p);
    t.after_sample = t.countdown;
    t.frees_then = t.frees;
  }
  while (s->lock.exchange(1, std::memory_order_acquire) != 0) {
  }
  const uint32_t stack =
      intern_stack(*s, frames + first, static_cast<uint32_t>(std::min(n - first, int{wire::kMaxFrames})));
  const wire::AllocRecord r{static_cast<uint8_t>(Kind::Alloc), stack, event_time(),
                            reinterpret_cast<uintptr_t>(p), size};
  put(*s, &r, sizeof r);
  s->lock.store(0, std::memory_order_release);
}

// Records a free that the fast path could not rule out (caller holds tls.busy).
void record_free(void* p) {
  if (!sending()) return;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  uint8_t temporary = 0;
  if (!full_mode) {
    if (!sampled_bits) return;
    size_t bit = addr_bit(p);
    bool shared = false;
    set_lock();
    const bool sampled = set_erase(addr, shared);
    // Cleared with the last sampled block on it: an address the allocator hands out again must not send
    // every later free to this path.
    if (sampled && !shared)
      sampled_bits[bit / 64].fetch_and(~(uint64_t{1} << (bit % 64)), std::memory_order_relaxed);
    set_unlock();
    if (!sampled) return;  // an unsampled block sharing a sampled one's bit
    Tls& t = tls;
    temporary = t.last_sampled == addr && t.countdown == t.after_sample && t.frees == t.frees_then + 1;
    if (t.last_sampled == addr) t.last_sampled = 0;
  }
  ThreadState* s = thread_state();  // first: a new thread's hello goes before its first event's time
  wire::FreeRecord r{static_cast<uint8_t>(Kind::Free), event_time(), addr, temporary};
  if (!s) {
    // A thread past its exit handler (another TLS destructor freeing): the free still counts, in a chunk of
    // its own (times then CLOCK_MONOTONIC), or its block would show as leaked.
    r.time = now_ns();
    const ChunkHeader h{wire::kMagic, cur_pid.load(), static_cast<uint32_t>(syscall(SYS_gettid)), sizeof r};
    unsigned char msg[sizeof h + sizeof r];  // packed: the header says how many bytes follow
    std::memcpy(msg, &h, sizeof h);
    std::memcpy(msg + sizeof h, &r, sizeof r);
    if (!write_all(msg, sizeof msg)) lost_chunks.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  while (s->lock.exchange(1, std::memory_order_acquire) != 0) {
  }
  put(*s, &r, sizeof r);
  s->lock.store(0, std::memory_order_release);
}

using fxprof::heap::shim::inner_calls;

// The real call, its own inner calls not counted: libmimalloc's realloc, posix_memalign... forward to its
// mi_* entry points through the PLT, which reach the shim's wrappers (heap/shim_hooks.h).
template <class Call>
inline auto forward(Call call) {
  fxprof::heap::shim::InnerCall inner;
  return call();
}

__attribute__((noinline)) void alloc_slow(void* p, size_t size) {
  Tls& t = tls;
  if (t.busy ||
      inner_calls) {  // (inner: an allocator's call to its own entry point, heap/shim_hooks.h)  // the hook's
                      // own allocation, or a signal handler's while the hook runs: not counted
    t.countdown += static_cast<int64_t>(size);
    return;
  }
  ++t.busy;
  record_alloc(t, p, size);
  --t.busy;
}

__attribute__((noinline)) void free_slow(void* p) {
  Tls& t = tls;
  if (t.busy || inner_calls) return;
  ++t.busy;
  record_free(p);
  --t.busy;
}

// The fast paths (see the header): after the real allocation, before the real free.
inline void note_alloc(void* p, size_t size) {
  Tls& t = tls;
  t.countdown -= static_cast<int64_t>(size);
  if (__builtin_expect(t.countdown > 0, 1)) return;
  alloc_slow(p, size);
}

inline void note_free(void* p) {
  if (std::atomic<uint64_t>* bits = sampled_bits) {
    ++tls.frees;  // a temporary is freed before its thread freed anything else too
    size_t bit = addr_bit(p);
    if (__builtin_expect(!(bits[bit / 64].load(std::memory_order_relaxed) & (uint64_t{1} << (bit % 64))), 1))
      return;
  }
  free_slow(p);
}

// At exit: every thread's chunk, the lost count, then the process's Bye (heap/wire.h).
void flush_all() {
  for (auto& slot : registry) {
    ThreadState* s = slot.load();
    if (!s) continue;
    if (s->lock.exchange(1, std::memory_order_acquire) != 0) continue;  // busy in another thread: skip
    flush_locked(*s);
    s->lock.store(0, std::memory_order_release);
  }
  if (uint64_t lost = lost_chunks.exchange(0)) {
    // One more try for the count itself, in a chunk of its own.
    struct {
      ChunkHeader h;
      Record r;
    } msg{{wire::kMagic, cur_pid.load(), static_cast<uint32_t>(syscall(SYS_gettid)), sizeof(Record)},
          {static_cast<uint8_t>(Kind::Lost), {}, 0, now_ns(), 0, lost}};
    write_all(&msg, sizeof msg);
  }
  struct {
    ChunkHeader h;
    Record r;
  } bye{{wire::kMagic, cur_pid.load(), static_cast<uint32_t>(syscall(SYS_gettid)), sizeof(Record)},
        {static_cast<uint8_t>(Kind::Bye), {}, 0, now_ns(), 0, 0}};
  write_all(&bye, sizeof bye);
}

void before_fork() {
  ++tls.busy;
  if (ThreadState* s = tls.state) {
    while (s->lock.exchange(1, std::memory_order_acquire) != 0) {
    }
    flush_locked(*s);
    s->lock.store(0, std::memory_order_release);
  }
  ++forks;
  set_lock();  // the child's copy of the set must not be caught mid-change by another thread
  --tls.busy;
}

void in_parent() { set_unlock(); }

void in_child() {
  set_unlock();
  cur_pid.store(static_cast<uint32_t>(getpid()));
  // Only this thread survives; its state starts over under the new pid (stack ids are per pid and tid).
  for (auto& slot : registry) slot.store(nullptr);
  if (ThreadState* s = tls.state) {
    s->pid = cur_pid.load();
    s->tid = static_cast<uint32_t>(syscall(SYS_gettid));
    s->fill = 0;
    s->stacks.reset();
    // Its own samples: with the parent's generator the children of a forking server would all sample the
    // same allocations.
    s->rng =
        fxprof::heap::shim::mix_seed(s->rng ^ (forks + 1) * 0xD1B54A32D192ED03ull ^ (seed ? 0 : now_ns()));
    if (!full_mode) tls.countdown = next_countdown(*s);
    registry[0].store(s);
    if (sending()) send_hello(*s);  // a new process's thread, to the recorder
  }
}

__attribute__((constructor)) void shim_init() {
  ++tls.busy;
  ready();
  // libunwind's default (global) cache of unwind info takes a lock, blocking signals with sigprocmask around
  // it, on every step its fast trace path cannot take; a per-thread cache needs neither (heaptrack does
  // this).
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  pthread_key_create(&exit_key, on_thread_exit);
  pthread_atfork(before_fork, in_parent, in_child);
  --tls.busy;
}

__attribute__((destructor)) void shim_fini() {
  ++tls.busy;
  flush_all();
  --tls.busy;
}

// _exit and _Exit run no destructors: flush first (a forked child that does not exec usually leaves this
// way).
[[noreturn]] void flush_and_exit(ExitFn fn, int status) {
  if (ready()) {
    ++tls.busy;
    flush_all();
    --tls.busy;
  }
  if (fn) fn(status);
  for (;;) syscall(SYS_exit_group, status);
}

}  // namespace

namespace fxprof::heap::shim {
thread_local unsigned inner_calls __attribute__((tls_model("initial-exec"))) = 0;
bool hooks_ready() { return ready(); }
void hook_alloc(void* p, size_t size) { note_alloc(p, size); }
void hook_free(void* p) {
  if (p && !in_boot(p)) note_free(p);
}
}  // namespace fxprof::heap::shim

extern "C" {

__attribute__((visibility("default"))) void* malloc(size_t size) {
  if (__builtin_expect(!ready(), 0)) return boot_alloc(size);
  void* p = real.malloc(size);
  note_alloc(p, size);
  return p;
}

__attribute__((visibility("default"))) void free(void* p) {
  if (!p || in_boot(p)) return;
  if (__builtin_expect(!ready(), 0)) return;
  note_free(p);
  real.free(p);
}

__attribute__((visibility("default"))) void* calloc(size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) total = SIZE_MAX;  // the real calloc fails it
  if (__builtin_expect(!ready(), 0)) return total == SIZE_MAX ? nullptr : boot_alloc(total);  // already zero
  void* p = real.calloc(n, size);
  note_alloc(p, total);
  return p;
}

__attribute__((visibility("default"))) void* realloc(void* old, size_t size) {
  if (!ready() || in_boot(old)) {
    void* p = ready() ? malloc(size) : boot_alloc(size);
    if (p && old) {
      size_t room = static_cast<size_t>(boot_arena + sizeof boot_arena - static_cast<char*>(old));
      std::memcpy(p, old,
                  size < room ? size : room);  // a bootstrap block's size is unknown: copy what may be it
    }
    return p;
  }
  if (old) note_free(old);
  void* p = forward([&] { return real.realloc(old, size); });
  if (size != 0) note_alloc(p, size);
  return p;
}

__attribute__((visibility("default"))) void* reallocarray(void* old, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(old, total);
}

__attribute__((visibility("default"))) int posix_memalign(void** out, size_t align, size_t size) {
  if (!ready()) {
    *out = boot_alloc(size, align);
    return *out ? 0 : ENOMEM;
  }
  int rc = forward([&] { return real.posix_memalign(out, align, size); });
  note_alloc(rc == 0 ? *out : nullptr, size);
  return rc;
}

__attribute__((visibility("default"))) void* aligned_alloc(size_t align, size_t size) {
  if (!ready()) return boot_alloc(size, align);
  void* p = forward([&] { return real.aligned_alloc(align, size); });
  note_alloc(p, size);
  return p;
}

__attribute__((visibility("default"))) void* memalign(size_t align, size_t size) {
  if (!ready()) return boot_alloc(size, align);
  void* p = forward([&] { return real.memalign(align, size); });
  note_alloc(p, size);
  return p;
}

__attribute__((visibility("default"))) void* valloc(size_t size) {
  if (!ready()) return boot_alloc(size, 4096);
  void* p = forward([&] { return real.valloc(size); });
  note_alloc(p, size);
  return p;
}

__attribute__((visibility("default"))) void* pvalloc(size_t size) {
  if (!ready()) return boot_alloc(size, 4096);
  void* p = forward([&] { return real.pvalloc(size); });
  note_alloc(p, size);
  return p;
}

__attribute__((visibility("default"))) void _exit(int status) { flush_and_exit(real.exit_now, status); }
__attribute__((visibility("default"))) void _Exit(int status) noexcept {
  flush_and_exit(real.exit_now2, status);
}

// libunwind opens its memory-validation pipe inside the hook (busy): moved out of the program's way
// (heap/shim_pipe.h). Anyone else's pipe2 is the real one, untouched.
__attribute__((visibility("default"))) int pipe2(int fds[2], int flags) {
  const long rc = syscall(SYS_pipe2, fds, flags);
  if (rc == 0 && tls.busy) fxprof::heap::shim::move_high(fds);
  return rc == 0 ? 0 : -1;
}

__attribute__((visibility("default"))) size_t malloc_usable_size(void* p) {
  if (!p) return 0;
  if (in_boot(p)) return 0;  // bootstrap blocks are never handed to the program's own code
  if (!ready()) return 0;
  return real.usable(p);
}

}  // extern "C"
