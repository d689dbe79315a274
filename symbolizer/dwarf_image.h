// Internal to symbolizer/: the DWARF sections of a file with compressed debug sections (Debian's -dbg and
// -dbgsym files), inflated into one in-memory ELF image that libdw reads instead of the file.
//
// Why not libdw's own: dwarf_begin_elf inflates every .debug_* section with zlib (libelf's elf_compress),
// among them the location lists and address tables no lookup reads. libc6-dbg's debug file: 10.0 MB
// inflated by zlib in 52-57 ms of CPU against 8.5 MB by libdeflate in 27-30 ms (.debug_loclists alone is
// 1.4 MB), same VM, same load. Only ELFCLASS64 little-endian ET_EXEC/ET_DYN files with zlib (SHF_COMPRESSED)
// sections are taken; anything else is left to libdw.
#pragma once

#include <libelf.h>

#include <cstddef>
#include <memory>

#include "symbolizer/elf_file.h"

namespace fxprof::symbolizer {

// Anonymous memory of its own mapping, in 2 MiB pages where the kernel has them (MADV_HUGEPAGE): inflating
// libc6-dbg's sections into 4 KiB pages took 2,000 page faults, a third of the CPU time of opening them.
class PageBuffer {
 public:
  PageBuffer() = default;
  explicit PageBuffer(size_t size);  // data() is nullptr when the mapping failed
  ~PageBuffer();
  PageBuffer(PageBuffer&& o) noexcept;
  PageBuffer& operator=(PageBuffer&& o) noexcept;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* map_ = nullptr;  // the mapping (the data, 2 MiB-aligned, is inside it)
  size_t map_size_ = 0;
  char* data_ = nullptr;
  size_t size_ = 0;
};

class DwarfImage {
 public:
  // nullptr when `obj` has no compressed .debug_* section, is not a file this reads (another class, byte
  // order or compression; GNU .zdebug_* sections; a relocatable object), or a section does not inflate to
  // its stated size: the caller lets libdw read the file then.
  static std::unique_ptr<DwarfImage> inflate(const ElfObject& obj);
  // Only inflate() can make one (the key is private): an image is whole or not at all.
  struct Key {
   private:
    Key() = default;
    friend class DwarfImage;
  };
  explicit DwarfImage(Key) {}
  ~DwarfImage();
  DwarfImage(const DwarfImage&) = delete;
  DwarfImage& operator=(const DwarfImage&) = delete;

  Elf* elf() const { return elf_; }
  size_t bytes() const { return size_; }

 private:
  PageBuffer buf_;
  size_t size_ = 0;
  Elf* elf_ = nullptr;
};

// Whether libdw needs a .debug_* section to name functions, files, lines and inlines (the unit headers and
// DIEs, abbreviations, strings, line programs, range lists, address tables); not location lists,
// .debug_aranges, call frames, macros or name indexes.
bool dwarf_section_needed(const char* name);

}  // namespace fxprof::symbolizer
