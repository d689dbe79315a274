// Binaries as the unwinder sees them: one Module per mapped ELF file (or our own vDSO), its CFI as elf/cfi.h
// reads it (PT_LOAD segments, .eh_frame_hdr's search table, .debug_frame from the binary or its separate
// debug file: the reading the symbolizer shares), and the lookup of the Rule for one address in it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "elf/cfi.h"
#include "elf/elf.h"
#include "recorder/unwind/binaries.h"
#include "recorder/unwind/rules.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder::unw {

// CFI reading lives in elf/ (shared with the symbolizer); the unwinder uses its types unqualified.
using namespace fxprof::elf;

// Stacks whose walk stopped in a binary, by how (UnwindEnd).
struct StopCounts {
  uint64_t truncated = 0, failed = 0;
  uint64_t corrupt = 0;  // of the failed, at an FDE that could not be parsed (Rule::Corrupt)
};

// One binary, shared by every process that maps it: its CFI (elf/cfi.h) and how walks stopped in it.
struct Module : elf::CfiFile {
  StopCounts stops;
  uint32_t id = 0;
  const Binary* binary = nullptr;  // the table's entry whose bytes `image` points into (open_module)
};

// Loads a binary of the recording's table (Binaries) as a module (elf::load_elf on its bytes, the table's
// identity); m.ok says whether it worked.
void open_module(Module& m, const Binary& b);
// The same with a binary of its own: maps `path` (or our own "[vdso]") and reads its CFI and identity
// (elf::open_cfi_file).
inline void open_module(Module& m, std::string_view path) { elf::open_cfi_file(m, path); }
// The Rule for an address of `m`: `look` is the svma looked up (ra - 1 for return addresses), `ip_svma` the
// address itself (a sigreturn trampoline is recognised by its code there).
Rule compute_rule(Module& m, uint64_t look, uint64_t ip_svma, UnwindStats& stats);

}  // namespace fxprof::recorder::unw
