// Allocators the shim cannot see (heap/heap.h, own_allocator): read from the executable's symbol tables.
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include <memory>
#include <set>
#include <string_view>

#include "base/fd.h"
#include "heap/heap.h"

namespace fxprof::heap {
namespace {

// Entry points of allocators that programs link in instead of calling the C library's malloc: jemalloc
// (je_ prefix; tikv-jemallocator's _rjem_), mimalloc, tcmalloc, rpmalloc, snmalloc. An executable that
// defines `malloc` itself also keeps its calls from the shim (its own definition comes first in symbol
// lookup).
bool allocator_symbol(std::string_view name) {
  for (std::string_view s :
       {"malloc", "je_malloc", "je_mallocx", "_rjem_malloc", "_rjem_mallocx", "mi_malloc", "mi_heap_malloc",
        "tc_malloc", "rpmalloc", "sn_malloc", "__rg_alloc"})
    if (name == s) return true;
  return false;
}

// Their free functions, recorded with the allocation functions by uprobes (heap.h, allocator_role).
bool free_symbol(std::string_view name) {
  for (std::string_view s : {"free", "je_free", "je_sdallocx", "_rjem_free", "_rjem_sdallocx", "mi_free",
                             "tc_free", "rpfree", "sn_free", "__rg_dealloc"})
    if (name == s) return true;
  return false;
}

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};

}  // namespace

OwnAllocator own_allocator(const std::string& path) {
  OwnAllocator out;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return out;
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) return out;
  size_t phnum = 0;
  bool interp = false;
  if (elf_getphdrnum(elf.get(), &phnum) == 0)
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf.get(), static_cast<int>(i), &ph) && ph.p_type == PT_INTERP) interp = true;
    }
  out.static_executable = phnum > 0 && !interp;
  std::set<std::string> found, frees;
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn; scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
        sh.sh_entsize == 0)
      continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF ||
          GELF_ST_TYPE(sym.st_info) != STT_FUNC)
        continue;
      const char* name = elf_strptr(elf.get(), sh.sh_link, sym.st_name);
      if (name && allocator_symbol(name)) found.insert(name);
      if (name && free_symbol(name)) frees.insert(name);
    }
  }
  // A Rust #[global_allocator] (__rg_alloc) that is the System allocator calls malloc: only worth saying
  // with an allocator that does not.
  if (found.size() == 1 && found.count("__rg_alloc")) found.clear();
  out.functions.assign(found.begin(), found.end());
  if (!found.empty()) out.frees.assign(frees.begin(), frees.end());
  return out;
}

AllocatorRole allocator_role(std::string_view function) {
  if (function == "mi_heap_malloc") return AllocatorRole::Other;  // (heap, size)
  if (allocator_symbol(function)) return AllocatorRole::Alloc;
  if (free_symbol(function)) return AllocatorRole::Free;
  return AllocatorRole::Other;
}

std::string own_allocator_line(const std::string& program, const OwnAllocator& a,
                               const std::string& uprobes_error) {
  if (a.static_executable)
    return "heap: " + program +
           " is statically linked: no library can be preloaded into it, so --heap records none of its "
           "allocations";
  if (a.functions.empty()) return "";
  std::string list;
  for (const std::string& f : a.functions) list += (list.empty() ? "" : ", ") + f;
  std::string line = "heap: " + program + " has its own allocator (" + list +
                     "): the allocations made through it do not go through the C library's malloc, so --heap "
                     "does not see them";
  if (!uprobes_error.empty()) line += " (recording them with uprobes failed: " + uprobes_error + ")";
  return line;
}

std::string uprobes_line(const std::string& program, const std::vector<std::string>& functions,
                         uint64_t calls, uint64_t dropped) {
  std::string list;
  for (const std::string& f : functions) list += (list.empty() ? "" : ", ") + f;
  std::string line = "heap: " + program + " has its own allocator: recorded with uprobes on " + list + " (" +
                     std::to_string(calls) + " calls, each a trap into the kernel)";
  if (dropped > 0) line += "; " + std::to_string(dropped) + " calls lost (the uprobes' ring buffer was full)";
  return line;
}

}  // namespace fxprof::heap
