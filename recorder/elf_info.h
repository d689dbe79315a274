// fxprof recorder internals: what the recorder needs from an ELF file to describe a mapping as a model::Lib:
// the GNU build ID and the PT_LOAD segments (for the SVMA bias). Read from the program headers and PT_NOTE
// segments only (a few KiB of a lazily mmap'ed file), never the sections or symbols.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/profile.h"

namespace fxprof::recorder {

struct ElfLoad {
  uint64_t vaddr = 0, offset = 0, filesz = 0;
};

struct ElfInfo {
  std::vector<uint8_t> build_id;  // empty if the file has none
  std::vector<ElfLoad> loads;     // PT_LOAD segments in file order
  uint64_t base_svma = 0;         // p_vaddr of the first PT_LOAD
};

// Parses an ELF64 image in memory (a mapped file or the vDSO). nullopt if it is not one.
std::optional<ElfInfo> parse_elf(std::span<const std::byte> image);
std::optional<ElfInfo> read_elf_file(const std::string& path);
// Our own vDSO (same kernel, so the same image as in every process we record), from
// getauxval(AT_SYSINFO_EHDR).
const std::optional<ElfInfo>& own_vdso();

// The "offset" of model::Lib for a mapping of file offset `pgoff`: relative address = address - (start -
// offset) is then the ELF's SVMA minus its base SVMA, what the symbol server understands.
uint64_t lib_offset(const ElfInfo& elf, uint64_t pgoff);

// Fills a Lib for an executable mapping [start, end) of `path` at file offset `pgoff`.
model::Lib make_lib(uint64_t start, uint64_t end, uint64_t pgoff, const std::string& path,
                    const ElfInfo* elf);

}  // namespace fxprof::recorder
