// Internal to symbolizer/: ELF files through libelf — identity (build ID, base SVMA, debuglink), the code
// bytes, and the symbol table (.symtab, .dynsym, synthesized PLT stubs, MiniDebugInfo).
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace fxprof::symbolizer {

// One opened ELF image: a file (libelf maps it) or a decompressed in-memory image (MiniDebugInfo).
class ElfObject {
 public:
  static Result<std::unique_ptr<ElfObject>> open(const std::string& path);
  static Result<std::unique_ptr<ElfObject>> from_memory(std::string image, std::string label);
  ~ElfObject();
  ElfObject(const ElfObject&) = delete;
  ElfObject& operator=(const ElfObject&) = delete;

  Elf* elf() const { return elf_; }
  const std::string& path() const { return path_; }
  const std::vector<uint8_t>& build_id() const { return build_id_; }
  uint64_t base_svma() const { return base_svma_; }  // p_vaddr of the first PT_LOAD (0 without phdrs)
  uint16_t machine() const { return machine_; }
  bool has_section(std::string_view name) const { return section(name) != nullptr; }
  Elf_Scn* section(std::string_view name) const;
  // .gnu_debuglink: the file name and its CRC32, if present.
  std::optional<std::pair<std::string, uint32_t>> debuglink() const;
  // .gnu_debugaltlink (dwz): the alt file's path as recorded and its build ID, if present.
  std::optional<std::pair<std::string, std::vector<uint8_t>>> debugaltlink() const;
  // Decompresses the SHF_COMPRESSED .debug_* sections in place (libelf's elf_compress, what libdw does when
  // it opens the file) and says whether all of them were: libdw 0.188 skips a section it cannot
  // decompress (out of memory) and then reads through the missing section (a crash in dwarf_attr).
  bool decompress_debug_sections() const;
  // The sizes of the symbol tables and their strings (.symtab, .dynsym, their STRTABs): libelf's copies of
  // them (read, not mapped) live as long as this object, for the names that point into them.
  uint64_t symbol_sections_bytes() const;
  // The .debug_* sections' bytes once decompressed (what libdw will hold of them).
  uint64_t debug_sections_bytes() const;
  // Bytes [offset, offset + size) of the file (or the in-memory image), read with pread: libelf keeps no
  // copy (its elf_rawdata holds a section's bytes as long as the object lives). False when short.
  bool read_at(uint64_t offset, void* out, size_t size) const;
  // A SHF_COMPRESSED section's header, read from the file (gelf_getchdr would make libelf read the whole
  // section and keep it); nullopt when it cannot be read.
  struct CompressionHeader {
    uint32_t type = 0;  // ELFCOMPRESS_ZLIB, ELFCOMPRESS_ZSTD
    uint64_t size = 0;  // inflated
    uint64_t align = 0;
    uint64_t header_size = 0;  // the compressed stream starts there
  };
  std::optional<CompressionHeader> compression_header(const GElf_Shdr& sh) const;
  bool elf64_little_endian() const { return elf64_le_; }
  // The decompressed .gnu_debugdata image, if present.
  Result<std::string> mini_debug_info() const;
  // Bytes of the file image backing [svma, svma+size) through PT_LOAD segments (clipped to the segment),
  // read with pread: empty when the file changed since it was opened (rewritten in place by a new build).
  std::vector<uint8_t> code_bytes(uint64_t svma, uint64_t size) const;
  size_t owned_bytes() const { return image_.size(); }

 private:
  ElfObject() = default;
  template <typename Fn>
  Elf_Scn* find_section(Fn&& fn) const;
  Status init();
  UniqueFd fd_;
  struct stat opened_ {};  // the file's identity when opened (size, mtime), to notice in-place rewrites
  std::string image_;      // owned image (from_memory)
  Elf* elf_ = nullptr;
  std::string path_;
  std::vector<uint8_t> build_id_;
  uint64_t base_svma_ = 0;
  uint16_t machine_ = 0;
  bool elf64_le_ = false;  // ELFCLASS64, ELFDATA2LSB
};

// A sorted, deduplicated function-symbol table with lib-relative addresses.
class SymbolTable {
 public:
  struct Symbol {
    uint64_t start;    // lib-relative (SVMA - base SVMA)
    uint64_t size;     // 0 = unknown (extends to the next symbol)
    const char* name;  // mangled; points into an ELF string table or names_
  };

  // Adds the function symbols of .symtab and .dynsym of `obj`; `base_svma` is the library's base SVMA.
  void add_elf_symbols(const ElfObject& obj, uint64_t base_svma);
  // Adds "name@plt" stubs for x86_64 .plt/.plt.sec from .rela.plt and .dynsym.
  void add_plt_symbols(const ElfObject& obj, uint64_t base_svma);
  // `_init` and `_fini` over the .init and .fini sections (dlopen and exit run them; a stripped library has
  // no symbol there).
  void add_init_fini_symbols(const ElfObject& obj, uint64_t base_svma);
  // Adds one symbol with its own name (perf map entries).
  void add(uint64_t start, uint64_t size, std::string name);
  // Sorts and keeps one symbol per start (the name perf would show); call once after the adds.
  void finish();

  // The symbol containing `rel` (any byte inside it), or nullptr.
  const Symbol* find(uint64_t rel) const;
  // Index of a symbol returned by find() (for per-symbol caches).
  size_t index_of(const Symbol* s) const { return static_cast<size_t>(s - symbols_.data()); }
  size_t size() const { return symbols_.size(); }
  const Symbol& at(size_t i) const { return symbols_[i]; }
  bool empty() const { return symbols_.empty(); }
  size_t memory_bytes() const;
  // The end of symbol `s` (its size, or the next symbol's start when the size is unknown).
  uint64_t end_of(const Symbol* s) const;

 private:
  struct Pending {
    Symbol sym;
    uint8_t rank;  // 0 global (and synthesized names), 1 local, 2 weak: see finish()
    // finish()'s other keys, made once here rather than in each comparison of the sort (node's 185,000
    // symbols: strlen in the comparisons was a third of loading them).
    uint8_t underscores = 0;  // leading, at most 255
    uint32_t length = 0;
    uint32_t seq = 0;  // order of the adds: the last key, so that an in-place sort keeps it among equals
  };
  void push(const Symbol& sym, uint8_t rank);
  static uint8_t binding_rank(unsigned bind) { return bind == STB_LOCAL ? 1 : bind == STB_WEAK ? 2 : 0; }
  std::vector<Pending> pending_;  // the adds, until finish()
  std::vector<Symbol> symbols_;
  std::deque<std::string> names_;  // synthesized names (PLT stubs)
};

}  // namespace fxprof::symbolizer
