// fxprof heap: the recorder's side of `fxprof record --heap`.
//
// HeapSource::start() opens a pipe, starts a reader and a worker thread and puts the interposition library
// (libfxprof_heap.so, next to the fxprof binary; heap/shim.cpp) into this process's environment as
// LD_PRELOAD, with the pipe's write end in FXPROF_HEAP_FD, so that the program launched next (and everything
// it forks and execs) inherits both. finish() takes them out of the environment again (so nothing fxprof runs
// later, such as the browser, is recorded), closes our write end, waits for the end of the stream and puts
// the result in the profile: `Native allocation` rows on the allocating thread (blocks of one stack and
// time bucket aggregated, frees matched to their row), a `Memory` counter per process and meta.heap.
//
// The reader only copies the stream (heap/wire.h) into one reserved mapping, as fast as the program writes
// it: a full pipe blocks the program (rather than dropping events), so every cycle the reader spent per event
// was paid by a --heap=full program. The worker, on the other core, folds the copied chunks behind it while
// the program runs (heap/source_fold.h: frees matched to live blocks, rows and counters filled), merging the
// threads' chunks in time order; finish() folds only the tail and translates to the model, once perf has
// built the processes, threads and libs the stacks are symbolicated through. When a thread's events arrive
// after later ones were folded (its first chunk, sent when full), finish() folds the whole stream again,
// sorted, from the copy. The program can never outrun fxprof's memory: what grows is the stream, 29 bytes an
// allocation and 18 a free, and the fold's tables, a few per live block and row.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "model/profile.h"

namespace fxprof::heap {

enum class Mode { Sampled, Full };

struct Options {
  Mode mode = Mode::Sampled;
  double rate_bytes = 512 * 1024;  // sampled: mean bytes between samples
  std::string shim_path;           // "" = libfxprof_heap.so next to /proc/self/exe
  // Code of the executable `probed_exe` (its addresses in the file) recorded with uprobes
  // (OwnAllocator::code): the library leaves out what is allocated inside it (a Rust allocator that forwards
  // to malloc), counted once by the uprobes.
  std::string probed_exe;
  std::vector<std::pair<uint64_t, uint64_t>> probed_code;
};

// An allocation or free recorded outside the shim: uprobes on an allocator linked into the program
// (recorder/heap_uprobes.h), which the shim cannot see.
struct ExternalCall {
  uint64_t time = 0;  // CLOCK_MONOTONIC ns
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0;
  uint64_t size = 0;            // an allocation's bytes asked for
  bool alloc = true;            // false: a free
  std::vector<uint64_t> stack;  // an allocation's return addresses, leaf first
};

// A process whose stream ended without its Bye (heap/wire.h): it closed or replaced the pipe's descriptor,
// was killed, or outlived the recording. Its allocations after `time_ns` (CLOCK_MONOTONIC: its last chunk's)
// are not in the profile.
struct StreamCut {
  uint32_t pid = 0;
  uint64_t time_ns = 0;
};
// The data-quality line saying so; `start_ns`: the recording's start, for the time.
std::string stream_cut_line(const std::string& program, const StreamCut& cut, uint64_t start_ns);

// What finish() says about the stream itself; the heap's figures are in the profile (sinks/heap_report.h).
struct Summary {
  Mode mode = Mode::Sampled;
  uint64_t lost_chunks = 0;  // chunks the program could not write (pipe closed)
  uint64_t events = 0;
  uint64_t folded_while_running = 0;  // of the events, folded by the worker before finish() was called
  bool refolded = false;        // threads' events came out of order: the stream was folded again, sorted
  std::vector<StreamCut> cuts;  // processes whose stream ended early, by pid
};

class HeapSource {
 public:
  static Result<std::unique_ptr<HeapSource>> start(const Options& options);
  ~HeapSource();
  HeapSource(const HeapSource&) = delete;
  HeapSource& operator=(const HeapSource&) = delete;

  // Calls recorded outside the shim, before finish(): sampled as the shim samples in sampled mode (the same
  // rate and weights), every one in full mode, and then the same rows, counters and figures as the shim's.
  void add_external(std::span<const ExternalCall> calls);

  // Restores the environment, reads what is left and adds markers and counters to `profile`.
  Summary finish(model::Profile& profile);

  // Waits until the worker has folded `events` events (or the timeout passes): for tests.
  bool wait_folded(uint64_t events, std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit HeapSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Allocators the shim cannot see, found in the executable `path` (the program fxprof launches): a statically
// linked executable (nothing can be preloaded into it) and allocator entry points it defines itself
// (jemalloc, mimalloc, tcmalloc linked in, its own malloc; a Rust #[global_allocator]: its __rust_alloc
// family, or __rg_alloc's before rustc ~1.78, without the default allocator's __rdl_alloc).
struct OwnAllocator {
  bool static_executable = false;
  bool rust = false;                   // a Rust #[global_allocator]: it may forward to malloc, or not
  std::vector<std::string> functions;  // the allocator functions found (symbols, Rust's mangled), sorted
  std::vector<std::string> frees;      // their free functions found (when any allocator function is)
  std::vector<std::pair<uint64_t, uint64_t>> code;  // [start, end) of each, addresses in the file
};
OwnAllocator own_allocator(const std::string& path);
// The data-quality line saying so ("" when there is nothing to say), with why uprobes could not record the
// functions (`uprobes_error`: "" when not tried).
std::string own_allocator_line(const std::string& program, const OwnAllocator& a,
                               const std::string& uprobes_error = "");
// The data-quality line for a Rust #[global_allocator] recorded with uprobes on `functions`: rustc >= 1.79
// inlines the allocator into the crate's callers (measured with 1.95: a bump allocator's Vec and String
// allocations never call __rust_alloc), so what it does not forward to malloc may be missing.
std::string rust_allocator_line(const std::string& program, const std::vector<std::string>& functions);
// The line saying that uprobes recorded them: which functions, how many calls, how many were lost.
std::string uprobes_line(const std::string& program, const std::vector<std::string>& functions,
                         uint64_t calls, uint64_t dropped);

// What an allocator function found by own_allocator() does, for recording it with uprobes (its arguments):
// Alloc (size), Calloc (n, size), Memalign (alignment, size), Realloc (block, size: a free of the block and
// an allocation), RustRealloc (__rg_realloc: block, old size, alignment, new size), PosixMemalign (out,
// alignment, size: 0 on success), Free (block); Other (mi_heap_malloc: heap, size) is not recorded.
enum class AllocatorRole { Alloc, Calloc, Memalign, Realloc, RustRealloc, PosixMemalign, Free, Other };
AllocatorRole allocator_role(std::string_view function);

}  // namespace fxprof::heap
