// Internal to symbolizer/: one library as the symbolizer holds it (opened files, symbol table, DWARF index,
// interned names), how it is loaded (load.cpp) and how addresses are resolved in it (lookup.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "elf/cfi.h"
#include "symbolizer/dwarf_index.h"
#include "symbolizer/elf_file.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::symbolizer {

// "ABC" from "abc": breakpad IDs are compared in upper case.
std::string upper(std::string_view s);

// A library's opened files and indexes. Everything but the immutable parts is guarded by `mu`.
struct Library {
  std::mutex mu;
  std::string debug_name;
  uint64_t base_svma = 0;
  std::vector<std::unique_ptr<ElfObject>> objects;  // kept open: names point into their string tables
  ElfObject* code = nullptr;                        // the binary itself (for disassembly); may be null
  SymbolTable symbols;
  // The DWARF index, made on first need by dwarf_index() from the first of `dwarf_files` that has DWARF
  // (the debug file, then the binary). Opening DWARF inflates the compressed debug sections a lookup reads
  // (dwarf_image.h; libc's debug file: 8.5 MB, ~30 ms of CPU) and an address outside every function of the
  // symbol table never needs it, so a request of only such addresses (a baked profile's unresolved frames,
  // asked again) does not pay for it.
  std::unique_ptr<DwarfIndex> dwarf;
  const ElfObject* dwarf_files[2] = {nullptr, nullptr};
  const ElfObject* dwarf_alts[2] = {nullptr, nullptr};  // each one's .gnu_debugaltlink file (dwz), if found
  // Where a split DWARF package (.dwp) may be, as llvm-symbolizer and gdb look: <binary>.dwp, beside the
  // debug file, in the --symbol-dir folders.
  std::vector<std::string> dwp_paths;
  bool dwarf_tried = false;
  // The binary's .eh_frame through elf/'s CFI reader (the unwinder's), opened by fde_range() on the first
  // address no symbol names (a stripped binary): its FDEs are the functions then.
  std::unique_ptr<elf::CfiFile> cfi;
  bool cfi_tried = false;
  std::string source;  // which files were used, for messages
  // Debug files the library names and that were not found (a .gnu_debuglink, a dwz alt file, split DWARF
  // .dwo files and .dwp units come from the DWARF index), each one line naming the file and where it was
  // looked for: plain data for the caller's data-quality entries (Symbolizer::missing_files).
  std::vector<MissingFile> missing;
  // Demangled names and file paths with their JSON literals, made lazily (node-based maps: pointers stay
  // valid, and a Name is never changed once made, so it can be read without the lock).
  std::unordered_map<const char*, Name> sym_names;  // by symbol name pointer
  std::unordered_map<const char*, Name> dwarf_names;
  std::unordered_map<const char*, Name> files;
  std::unordered_map<uint64_t, Name> fde_names;  // "<debug_name>+0x<start>" by an FDE's lib-relative start
  size_t names_bytes = 0;
  std::vector<RawFrame> scratch;

  size_t memory_bytes() const;

  // The DWARF index, opened on the first call (caller holds mu); nullptr when no file has DWARF.
  DwarfIndex* dwarf_index();

  // The lib-relative [start, end) of the .eh_frame FDE covering `rel` (caller holds mu): the function there
  // when no symbol names it. nullopt without the binary, or where no FDE covers `rel`.
  struct Range {
    uint64_t start = 0, end = 0;
  };
  std::optional<Range> fde_range(uint64_t rel);

  // Resolves many lib-relative addresses (caller holds mu) in address order (successive binary searches then
  // touch nearby memory: far fewer cache misses than in request order), each distinct address once.
  // out.addresses[i] answers addrs[i]; inlined frames are appended to out.inlines.
  void resolve_all(std::span<const uint64_t> addrs, Resolution& out);

 private:
  const Name* name_of(std::unordered_map<const char*, Name>& cache, const char* raw);
  const Name* file_of(const char* path);
  const Name* fde_name(uint64_t start);
  void resolve(uint64_t rel, Resolution::Address& r, std::vector<Resolution::Frame>& inl);
};

// Finds and opens the files of a library (the binary, its debug file) and indexes them; an error naming what
// was tried when no file carries the wanted build ID.
Result<std::shared_ptr<Library>> load_library(const KnownLib& lib, const Options& options);

}  // namespace fxprof::symbolizer
