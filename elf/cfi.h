// Call-frame information parsing (.eh_frame, .eh_frame_hdr, .debug_frame) for the unwinder
// (recorder/unwind/) and the symbolizer (a stripped binary's functions are its FDEs): bounds-checked byte
// reading, DW_EH_PE_* pointers, CIE and FDE headers, a sorted FDE index for sections without a search
// table, and one binary's CFI as a file (CfiFile). Nothing here evaluates CFA programs
// (recorder/unwind/rules.h) or knows about processes (recorder/unwind/unwinder.h).
//
// Design: entries are parsed in place from the mmap'ed file (no copy). A CIE is re-parsed with each FDE
// (about 30 bytes, ~50 ns): caching CIEs measured no gain because the parsed rule is cached per address
// (unwinder.h), so an FDE is parsed once per distinct address, a few thousand times in a whole recording.
// A malformed file never reads out of bounds: Cursor turns every overrun into `bad` and zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_reader.h"
#include "base/fd.h"
#include "elf/elf.h"

namespace fxprof::elf {

// DWARF x86-64 register numbers.
constexpr uint32_t kDwRbx = 3, kDwRbp = 6, kDwRsp = 7, kDwR12 = 12, kDwR15 = 15, kDwRip = 16;

// Bounds-checked little-endian reading; a malformed file sets `bad` and reads zeros, never past the end.
using Cursor = ByteReader;

// A section's bytes and its address in the binary's own address space (svma).
struct Section {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t vaddr = 0;
  bool empty() const { return data == nullptr || size == 0; }
};

// Bases for DW_EH_PE_* pointer encodings.
struct PtrBase {
  const Section* sec = nullptr;  // pcrel: address of the field itself
  uint64_t data = 0;             // datarel (.eh_frame_hdr address)
};

// Reads one DW_EH_PE_* encoded pointer; false on DW_EH_PE_omit, an unsupported encoding or an overrun.
bool read_encoded(Cursor& c, uint8_t enc, const PtrBase& base, uint64_t& out);

struct FdeRef {
  uint64_t pc;
  uint64_t off;  // offset of the FDE in its section
  bool operator<(const FdeRef& o) const { return pc < o.pc; }
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint32_t ra_reg = kDwRip;
  uint8_t fde_enc = 0;
  bool aug_z = false;
  bool signal = false;
  const uint8_t* insns = nullptr;
  const uint8_t* insns_end = nullptr;
};

struct Fde {
  uint64_t pc_begin = 0, pc_end = 0;
  Cie cie;
  const uint8_t* insns = nullptr;
  const uint8_t* insns_end = nullptr;
};

// Parses the CIE at `off` of `sec` (`eh`: .eh_frame id conventions, else .debug_frame's).
bool parse_cie(const Section& sec, uint64_t off, bool eh, const PtrBase& base, Cie& cie);
// Parses the FDE at `off` and its CIE; false for a CIE, a malformed entry or an unknown augmentation.
bool parse_fde(const Section& sec, uint64_t off, bool eh, const PtrBase& base, Fde& fde);
// Walks every FDE of a section (for sections without a search table) into an index sorted by pc.
std::vector<FdeRef> index_fdes(const Section& sec, bool eh, const PtrBase& base);
// The offset of the FDE whose pc_begin is the greatest <= pc in a sorted index.
bool find_in_index(const std::vector<FdeRef>& idx, uint64_t pc, uint64_t& off);

// One binary's CFI: the mmap'ed file itself (.eh_frame_hdr's sorted table, 8 bytes an FDE, is binary-searched
// in place: libpython's 5,900 FDEs in 13 probes, no parse, no copy). Only a binary without a usable table,
// and .debug_frame (loaded lazily, on the first address .eh_frame lacks: most binaries never need it), get
// a sorted FDE index, built once. The separate debug file is found by the locator (elf.h): build-ID trees,
// .gnu_debuglink with its CRC, the --symbol-dir folders, build ID checked.
struct CfiFile {
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

  Identity identity;  // build ID, segments with flags, debuglink: the parse shared with the recorder
  const LocatorOptions* locator = nullptr;  // where debug files are looked for (null: the defaults)
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
void open_cfi_file(CfiFile& m, std::string_view path);
// Reads the ELF image in m.image (program headers, .eh_frame_hdr/.eh_frame); sets m.ok. m.identity (build ID,
// debuglink: where .debug_frame is looked for) is filled by open_cfi_file, or by a caller that parsed it.
void load_elf(CfiFile& m);
// Loads .debug_frame from the binary itself or its separate debug file (find_debug_fde calls it once).
void load_debug_frame(CfiFile& m);
// The FDE covering `svma` in .eh_frame / in .debug_frame (loaded on first use).
enum class FdeLookup { Found, None, Corrupt };  // Corrupt: the search table points at unparsable bytes
FdeLookup find_eh_fde(const CfiFile& m, uint64_t svma, Fde& fde);
bool find_debug_fde(CfiFile& m, uint64_t svma, Fde& fde);
}  // namespace fxprof::elf
