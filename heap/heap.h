// fxprof heap: the recorder's side of `fxprof record --heap`.
//
// HeapSource::start() opens a pipe, starts one reader thread and puts the interposition library
// (libfxprof_heap.so, next to the fxprof binary; heap/shim.cpp) into this process's environment as
// LD_PRELOAD, with the pipe's write end in FXPROF_HEAP_FD, so that the program launched next (and everything
// it forks and execs) inherits both. finish() takes them out of the environment again (so nothing fxprof runs
// later, such as the browser, is recorded), closes our write end, reads to the end of the stream and turns
// the events into the profile: `Native allocation` markers on the allocating thread (frees with negative
// sizes, matched to their allocation by address) and a `Memory` counter per process.
//
// The reader thread only copies the stream (heap/wire.h) into one anonymous mapping (8 MiB first, doubled
// by mremap, filled with huge pages), as fast as the program writes it: a full pipe blocks the program
// (rather than dropping events), so every cycle the reader spends per event is paid by a --heap=full
// program (parsing there, into a growing event list, made the program wait on the pipe 70% of its time).
// The chunks become events and stacks, and the model is touched, once, after recording, when the perf side
// has built the processes, threads and libs the stacks are symbolicated through. The program can never
// outrun fxprof's memory: what grows is the stream, 32 bytes an event.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/profile.h"

namespace fxprof::heap {

enum class Mode { Sampled, Full };

struct Options {
  Mode mode = Mode::Sampled;
  double rate_bytes = 512 * 1024;  // sampled: mean bytes between samples
  std::string shim_path;           // "" = libfxprof_heap.so next to /proc/self/exe
};

struct Site {
  std::string name;  // "function (lib)" or "lib+0xOFFSET"
  int64_t bytes = 0;
  uint64_t blocks = 0;
};

struct Summary {
  Mode mode = Mode::Sampled;
  uint64_t allocations = 0;  // (sampled: estimated)
  uint64_t temporary = 0;    // freed by the same thread with no other allocation in between
  uint64_t frees = 0;
  int64_t peak_bytes = 0;
  double peak_time_s = 0;      // since the recording started
  int64_t retained_bytes = 0;  // allocated and never freed when the program ended
  uint64_t retained_blocks = 0;
  std::vector<Site> top_sites;  // by retained bytes, at most 5
  uint64_t lost_chunks = 0;     // chunks the program could not write (pipe closed)
  uint64_t events = 0;
};

class HeapSource {
 public:
  static Result<std::unique_ptr<HeapSource>> start(const Options& options);
  ~HeapSource();
  HeapSource(const HeapSource&) = delete;
  HeapSource& operator=(const HeapSource&) = delete;

  // Restores the environment, reads what is left and adds markers and counters to `profile`.
  Summary finish(model::Profile& profile);

 private:
  struct Impl;
  explicit HeapSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The summary printed after recording (a few lines, ends with a newline).
std::string format_summary(const Summary& s);

}  // namespace fxprof::heap
