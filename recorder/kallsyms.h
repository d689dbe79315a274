// fxprof recorder internals: names the kernel frames of a finished recording from /proc/kallsyms.
//
// /proc/kallsyms is ~120k lines that the kernel generates on every read: ~40 ms of CPU on this VM, 150-300 ms
// of wall time under load. A recording therefore starts reading it in the background when it begins
// (Procfs::prefetch_kernel_symbols: the text symbols of a whole boot do not change while a program runs) and
// the end only looks its frames up in that table; only text symbols are kept (1 MB for 122k symbols, freed
// once the frames are named).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/host.h"

namespace fxprof::recorder {

// Sets Frame::name of every Kernel frame of `profile` whose address falls in a known kernel function, as
// `procfs` names them (live_procfs(): /proc/kallsyms). Returns the number of frames named (0 when kallsyms
// hides addresses: kernel.kptr_restrict).
size_t name_kernel_frames(model::Profile& profile, Procfs& procfs);

// The text symbols of /proc/kallsyms, read once. Kept deflated, in blocks of 128 symbols ("<offset from the
// block's first address in hex> <name>" lines: 1 MB for 122k symbols instead of 5 MB; the table lives while
// the program runs, at record's peak memory); only the blocks of the addresses asked are inflated.
class KernelSymbols {
 public:
  // Reads /proc/kallsyms now; an empty table when it cannot be read or hides addresses.
  static KernelSymbols read();
  // The text symbol at or below each of `addrs` (sorted, unique), "" where none (of several names at one
  // address the last listed, as perf shows); empty when the table is (addresses hidden).
  std::vector<std::string> names(std::span<const uint64_t> addrs) const;
  size_t size() const { return count_; }
  size_t memory_bytes() const;

 private:
  static constexpr size_t kBlock = 128;  // symbols per deflated block
  // kallsyms lists vmlinux's symbols in address order, then each module's, BPF programs'...: a run is a
  // stretch listed in address order, cut into blocks.
  struct Block {
    uint64_t first = 0, last = 0;  // its lowest and highest address
    std::string packed;
  };
  std::vector<Block> blocks_;       // in the order listed
  std::vector<size_t> run_starts_;  // the first block of each run
  size_t count_ = 0;
};

// /proc/kallsyms itself (live_procfs().kernel_symbols without a prefetch):
// KernelSymbols::read().names(addrs).
std::vector<std::string> read_kallsyms(std::span<const uint64_t> addrs);

}  // namespace fxprof::recorder
