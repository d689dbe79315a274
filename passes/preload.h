// fxprof passes: the symbols of a recording's binaries loaded while the program still runs, so that after
// its exit only lookups remain (issue 25 item 6: libc6-dbg's 10 MB of compressed DWARF cost ~31 ms of CPU to
// inflate, most of the wait after the exit; since issue 36 the symbolizer inflates only the 8.5 MB a lookup
// reads, with libdeflate: symbolizer/dwarf_image.h).
//
// The recorder tells each binary when a sample's stack first goes through it (recorder::Options::
// on_binary_sampled, on the recording thread); a second thread loads each one once through the Symbolizer
// (thread-safe: a lookup of a library being preloaded waits for that one load). Only what samples use is
// loaded: file-backed executable mappings of ELF files with a build ID, never pseudo-libraries ([vdso]).
// (Until issue 36 every binary was told when mapped: python3 maps 11, its samples go through 4-7.)
// They are the libraries symbolication loads at the end anyway, but now held beside the recording's buffers
// (freed before the end): record's peak RSS rose 46.5 -> 61.6 MB for gzip as root, 27.7 -> 29.3 MB with
// --cpu-only; the waker's eBPF ring, mapped once since (recorder/bpf_ring.h), brought the first back to 46
// (README, "What you wait for after the program exits").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "model/profile.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::passes {

class SymbolPreloader {
 public:
  // Starts the loading thread, with the recording's signals blocked in it (record() reads them from a
  // signalfd: delivered to this thread, SIGINT would kill fxprof).
  explicit SymbolPreloader(symbolizer::Symbolizer& symbols);
  // Stops (stop()) and joins: a load under way is finished first.
  ~SymbolPreloader();
  SymbolPreloader(const SymbolPreloader&) = delete;
  SymbolPreloader& operator=(const SymbolPreloader&) = delete;

  // The recorder's on_binary_sampled: queues the binary once per (debugName, breakpadId); never waits for a
  // load.
  void mapped(const model::Lib& lib);
  // The recording ended: queued binaries not started are dropped (symbolication loads what it needs); the
  // load under way goes on (a lookup of it waits for it). Returns how many binaries were loaded by now.
  size_t stop();

 private:
  void run();

  symbolizer::Symbolizer& symbols_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  struct Queued {
    symbolizer::KnownLib lib;
    long long size = 0;  // of the binary's file: loaded largest first
  };
  std::deque<Queued> queue_;
  std::unordered_set<std::string> seen_;  // debugName '\n' breakpadId
  size_t loaded_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace fxprof::passes
