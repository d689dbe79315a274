// Allocators the shim cannot see (heap/heap.h, own_allocator): read from the executable's symbol tables.
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "heap/heap.h"

namespace fxprof::heap {
namespace {

// Entry points of allocators that programs link in instead of calling the C library's malloc: jemalloc
// (je_ prefix; tikv-jemallocator's _rjem_), mimalloc, tcmalloc, rpmalloc, snmalloc, a Rust
// #[global_allocator] (__rg_ before rustc ~1.78; since, __rust_alloc is the allocator's own code and there
// is no __rdl_alloc, the default allocator's), and an executable that defines `malloc` itself (its own
// definition comes first in symbol lookup). A family is trusted only when its executable defines all four of
// its malloc, free, realloc and calloc as functions with code (a symbol size): a lone function that happens
// to be named je_malloc (a hash, a wrapper, a test double) is not an allocator, and probing it as one made
// up 4.66 GiB of allocations from a program that allocated nothing.
struct Family {
  std::string_view malloc, free, realloc, calloc;
  // Its other entry points, recorded too once the family is trusted.
  std::array<std::string_view, 5> more{};
};
constexpr Family kFamilies[] = {
    {"malloc", "free", "realloc", "calloc", {"posix_memalign", "aligned_alloc", "memalign"}},
    {"je_malloc",
     "je_free",
     "je_realloc",
     "je_calloc",
     {"je_mallocx", "je_sdallocx", "je_posix_memalign", "je_aligned_alloc", "je_memalign"}},
    {"_rjem_malloc",
     "_rjem_free",
     "_rjem_realloc",
     "_rjem_calloc",
     {"_rjem_mallocx", "_rjem_sdallocx", "_rjem_posix_memalign", "_rjem_aligned_alloc", "_rjem_memalign"}},
    {"mi_malloc",
     "mi_free",
     "mi_realloc",
     "mi_calloc",
     {"mi_heap_malloc", "mi_posix_memalign", "mi_aligned_alloc", "mi_memalign"}},
    {"tc_malloc", "tc_free", "tc_realloc", "tc_calloc", {"tc_posix_memalign", "tc_memalign"}},
    {"rpmalloc", "rpfree", "rprealloc", "rpcalloc", {"rpposix_memalign", "rpaligned_alloc", "rpmemalign"}},
    {"sn_malloc", "sn_free", "sn_realloc", "sn_calloc"},
    {"__rg_alloc", "__rg_dealloc", "__rg_realloc", "__rg_alloc_zeroed"},
    {"__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rust_alloc_zeroed"},
};

// A Rust symbol's family name: rustc >= 1.79 mangles its allocator shims with v0
// (`_RNvCs..._7___rustc12___rust_alloc`: the name's length, `_`, the name); older ones are plain.
std::string_view rust_name(std::string_view name) {
  if (!name.starts_with("_R")) return name;
  for (std::string_view n :
       {"__rust_alloc_zeroed", "__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rdl_alloc",
        "__rg_alloc_zeroed", "__rg_alloc", "__rg_dealloc", "__rg_realloc"})
    if (name.ends_with(n) && name.substr(0, name.size() - n.size()).ends_with(std::to_string(n.size()) + "_"))
      return n;
  return name;
}

// What each entry point's arguments are (heap.h); names of no family are Other.
AllocatorRole role_of(std::string_view name) {
  name = rust_name(name);
  if (name == "mi_heap_malloc") return AllocatorRole::Other;  // (heap, size)
  if (name == "__rg_realloc" || name == "__rust_realloc") return AllocatorRole::RustRealloc;
  for (const Family& f : kFamilies) {
    if (name == f.free || name.ends_with("sdallocx")) return AllocatorRole::Free;
    if (name == f.realloc) return AllocatorRole::Realloc;
    if (name == f.calloc) return AllocatorRole::Calloc;
  }
  if (name.ends_with("posix_memalign")) return AllocatorRole::PosixMemalign;
  if (name.ends_with("aligned_alloc") || name.ends_with("memalign")) return AllocatorRole::Memalign;
  for (const Family& f : kFamilies)
    if (name == f.malloc || name.ends_with("alloc_zeroed") || name.ends_with("mallocx"))
      return AllocatorRole::Alloc;
  return AllocatorRole::Other;
}

bool family_name(std::string_view name) {
  for (const Family& f : kFamilies) {
    if (name == f.malloc || name == f.free || name == f.realloc || name == f.calloc) return true;
    for (std::string_view m : f.more)
      if (!m.empty() && name == m) return true;
  }
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
  // Functions with code, by family name: their symbol and code (a Rust one's symbol is mangled).
  struct Function {
    std::string symbol;
    uint64_t start = 0, size = 0;
  };
  std::map<std::string, Function, std::less<>> defined;
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
          GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0)
        continue;
      const char* symbol = elf_strptr(elf.get(), sh.sh_link, sym.st_name);
      const std::string_view name = symbol ? rust_name(symbol) : "";
      if (family_name(name) || name == "__rdl_alloc")
        defined.try_emplace(std::string(name), Function{symbol, sym.st_value, sym.st_size});
    }
  }
  // A Rust program's __rust_alloc stands for every Rust allocation whatever the allocator behind it: with
  // it, that allocator's own entry points (jemalloc's...) would count each block twice. Its __rdl_alloc
  // is the default allocator's (malloc, which the heap library sees): then there is nothing to probe.
  const bool rust_default = defined.count("__rdl_alloc") > 0;
  auto trusted = [&](const Family& f) {
    return defined.count(f.malloc) && defined.count(f.free) && defined.count(f.realloc) &&
           defined.count(f.calloc);
  };
  const Family* rust = nullptr;
  for (const Family& f : kFamilies)
    if (!rust && !rust_default && f.malloc.starts_with("__r") && trusted(f)) rust = &f;
  std::set<std::string> found, frees;
  for (const Family& f : kFamilies) {
    if (!trusted(f) || (rust && &f != rust) || (rust_default && f.malloc.starts_with("__r"))) continue;
    for (std::string_view n :
         {f.malloc, f.free, f.realloc, f.calloc, f.more[0], f.more[1], f.more[2], f.more[3], f.more[4]}) {
      auto it = n.empty() ? defined.end() : defined.find(n);
      if (it == defined.end()) continue;
      (role_of(n) == AllocatorRole::Free ? frees : found).insert(it->second.symbol);
      out.code.emplace_back(it->second.start, it->second.start + it->second.size);
    }
  }
  out.rust = rust != nullptr;
  out.functions.assign(found.begin(), found.end());
  out.frees.assign(frees.begin(), frees.end());
  return out;
}

AllocatorRole allocator_role(std::string_view function) { return role_of(function); }

std::string own_allocator_line(const std::string& program, const OwnAllocator& a,
                               const std::string& uprobes_error) {
  if (a.static_executable)
    return "heap: " + program +
           " is statically linked: no library can be preloaded into it, so --heap records none of its "
           "allocations";
  if (a.functions.empty()) return "";
  std::string list;
  for (const std::string& f : a.functions) list += (list.empty() ? "" : ", ") + std::string(rust_name(f));
  // A Rust #[global_allocator] may forward to malloc (std::alloc::System, a counting wrapper): fxprof cannot
  // tell from its symbols, so it says what it does not know.
  std::string line =
      a.rust ? "heap: " + program + " has a Rust #[global_allocator] (" + list +
                   "): --heap sees its allocations only if it forwards them to the C library's malloc (as "
                   "std::alloc::System does), so the heap figures may be incomplete"
             : "heap: " + program + " has its own allocator (" + list +
                   "): the allocations made through it do not go through the C library's malloc, so --heap "
                   "does not see them";
  if (!uprobes_error.empty()) line += " (recording them with uprobes failed: " + uprobes_error + ")";
  return line;
}

std::string rust_allocator_line(const std::string& program, const std::vector<std::string>& functions) {
  std::string list;
  for (const std::string& f : functions) list += (list.empty() ? "" : ", ") + std::string(rust_name(f));
  return "heap: " + program + " has a Rust #[global_allocator]: recorded with uprobes where it is called (" +
         list +
         "), but an optimised build inlines it into the program's own functions, whose allocations --heap "
         "sees "
         "only if it forwards them to the C library's malloc (as std::alloc::System does): the heap figures "
         "may be incomplete";
}

std::string uprobes_line(const std::string& program, const std::vector<std::string>& functions,
                         uint64_t calls, uint64_t dropped) {
  std::string list;
  for (const std::string& f : functions) list += (list.empty() ? "" : ", ") + std::string(rust_name(f));
  std::string line = "heap: " + program + " has its own allocator: recorded with uprobes on " + list + " (" +
                     std::to_string(calls) + " calls, each a trap into the kernel)";
  if (dropped > 0) line += "; " + std::to_string(dropped) + " calls lost (the uprobes' ring buffer was full)";
  return line;
}

}  // namespace fxprof::heap
