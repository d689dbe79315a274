// Binaries as the unwinder sees them: one Module per mapped ELF file (or our own vDSO), its PT_LOAD
// segments, .eh_frame_hdr's search table, and .debug_frame from the binary or its separate debug file; and
// the lookup of the Rule for one address in it.
//
// Design: a module is the mmap'ed file itself: .eh_frame_hdr's sorted table (8 bytes an FDE) is
// binary-searched in place (libpython: 5,900 FDEs, 13 probes), no parse, no copy. Only a binary without a
// usable table, and .debug_frame (loaded lazily, on the first address .eh_frame lacks: most binaries never
// need it), get a sorted FDE index, built once. The separate debug file is found by elf/'s locator (the
// symbolizer's): build-ID trees, .gnu_debuglink with its CRC, the --symbol-dir folders, build ID checked.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "elf/elf.h"
#include "elf/cfi.h"
#include "recorder/unwind/rules.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder::unw {

// Stacks whose walk stopped in a binary, by how (UnwindEnd).
struct StopCounts {
  uint64_t truncated = 0, failed = 0;
  uint64_t corrupt = 0;  // of the failed, at an FDE that could not be parsed (Rule::Corrupt)
};

// One binary, shared by every process that maps it.
struct Module {
  StopCounts stops;
  uint32_t id = 0;
  std::string path;
  bool ok = false;  // has an ELF image we could read (else: frame pointers only)
  MappedFile file;
  std::span<const uint8_t> image;  // the file bytes (or our own vDSO's memory)
  struct Load {
    uint64_t off, vaddr, filesz;
  };
  std::vector<Load> loads;

  Section eh_hdr, eh;
  const uint8_t* table = nullptr;  // .eh_frame_hdr search table (datarel sdata4 pairs)
  size_t table_count = 0;
  std::vector<FdeRef> eh_index;  // when there is no usable table

  elf::Identity identity;  // build ID, segments with flags, debuglink: the parse shared with the recorder
  const elf::LocatorOptions* locator = nullptr;  // where debug files are looked for (null: the defaults)
  bool debug_tried = false;
  MappedFile debug_file;
  std::vector<uint8_t> debug_owned;  // decompressed .debug_frame
  Section dbg;
  std::vector<FdeRef> dbg_index;

  // svma -> pointer to the bytes there (n bytes available), or nullptr. Every bound is checked without
  // wrapping: callers pass svma - k for an address k bytes into a module (the return-address scan), which
  // wraps below 0 and used to pass a wrapped check (UBSan: pointer overflow on node's JIT code).
  const uint8_t* bytes_at(uint64_t svma, size_t n) const {
    for (const Load& l : loads) {
      if (svma < l.vaddr) continue;
      const uint64_t rel = svma - l.vaddr;
      if (rel > l.filesz || n > l.filesz - rel) continue;
      const uint64_t off = l.off + rel;
      if (off < l.off || off > image.size() || n > image.size() - off) continue;
      return image.data() + off;
    }
    return nullptr;
  }
};

// Maps `path` (or our own "[vdso]") into m.image and loads it (load_elf); m.ok says whether it worked.
void open_module(Module& m, std::string_view path);
// Reads the ELF image in m.image (program headers, .eh_frame_hdr/.eh_frame, build ID, debuglink); sets m.ok.
void load_elf(Module& m);
// Loads .debug_frame from the binary itself or its separate debug file (find_debug_fde calls it once).
void load_debug_frame(Module& m);
// The FDE covering `svma` in .eh_frame / in .debug_frame (loaded on first use).
enum class FdeLookup { Found, None, Corrupt };  // Corrupt: the search table points at unparsable bytes
FdeLookup find_eh_fde(const Module& m, uint64_t svma, Fde& fde);
bool find_debug_fde(Module& m, uint64_t svma, Fde& fde);
// The Rule for an address of `m`: `look` is the svma looked up (ra - 1 for return addresses), `ip_svma` the
// address itself (a sigreturn trampoline is recognised by its code there).
Rule compute_rule(Module& m, uint64_t look, uint64_t ip_svma, UnwindStats& stats);

}  // namespace fxprof::recorder::unw
