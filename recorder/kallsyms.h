// fxprof recorder internals: names the kernel frames of a finished recording from /proc/kallsyms.
//
// /proc/kallsyms is ~120k lines that the kernel generates on every read: ~40 ms of CPU on this VM, 150-300 ms
// of wall time under load. A recording therefore starts reading it in the background when it begins
// (Procfs::prefetch_kernel_symbols: the text symbols of a whole boot do not change while a program runs) and
// the end only looks its frames up in that table; only text symbols are kept (~4.5 MB for 122k symbols, freed
// once the frames are named, before symbolication).
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

// The text symbols of /proc/kallsyms, read once, sorted by address.
class KernelSymbols {
 public:
  // Reads /proc/kallsyms now; an empty table when it cannot be read or hides addresses.
  static KernelSymbols read();
  // The text symbol at or below each of `addrs` (sorted, unique), "" where none (of several names at one
  // address the last listed, as perf shows); empty when the table is (addresses hidden).
  std::vector<std::string> names(std::span<const uint64_t> addrs) const;
  size_t size() const { return syms_.size(); }

 private:
  struct Sym {
    uint64_t addr;
    uint32_t name;  // offset in names_
    uint32_t len;
  };
  std::vector<Sym> syms_;
  std::string names_;
};

// /proc/kallsyms itself (live_procfs().kernel_symbols without a prefetch): KernelSymbols::read().names(addrs).
std::vector<std::string> read_kallsyms(std::span<const uint64_t> addrs);

}  // namespace fxprof::recorder
