#include "symbolizer/elf_file.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace fxprof::symbolizer {
namespace {

void init_libelf() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
}

}  // namespace

Result<std::unique_ptr<ElfObject>> ElfObject::open(const std::string& path) {
  init_libelf();
  std::unique_ptr<ElfObject> obj(new ElfObject());
  obj->path_ = path;
  obj->fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!obj->fd_.valid()) return Err("cannot open " + path + ": " + errno_text(errno));
  // Read, not mapped: elfutils preads what is asked for into its own buffers. A mapping of a binary that a
  // new build overwrites in place (`cp`) turns every later access past the new end into SIGBUS.
  if (::fstat(obj->fd_.get(), &obj->opened_) != 0)
    return Err("cannot stat " + path + ": " + errno_text(errno));
  obj->elf_ = elf_begin(obj->fd_.get(), ELF_C_READ, nullptr);
  if (obj->elf_ == nullptr) return Err(path + ": " + elf_errmsg(-1));
  if (Status s = obj->init(); !s) return std::move(s).take_error();
  return obj;
}

Result<std::unique_ptr<ElfObject>> ElfObject::from_memory(std::string image, std::string label) {
  init_libelf();
  std::unique_ptr<ElfObject> obj(new ElfObject());
  obj->path_ = std::move(label);
  obj->image_ = std::move(image);
  obj->elf_ = elf_memory(obj->image_.data(), obj->image_.size());
  if (obj->elf_ == nullptr) return Err(obj->path_ + ": " + elf_errmsg(-1));
  if (Status s = obj->init(); !s) return std::move(s).take_error();
  return obj;
}

ElfObject::~ElfObject() {
  if (elf_ != nullptr) elf_end(elf_);
}

Status ElfObject::init() {
  if (elf_kind(elf_) != ELF_K_ELF) return Err(path_ + " is not an ELF file");
  GElf_Ehdr eh;
  if (gelf_getehdr(elf_, &eh) == nullptr) return Err(path_ + ": " + elf_errmsg(-1));
  machine_ = eh.e_machine;
  elf64_le_ = eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == ELFDATA2LSB;
  const void* id = nullptr;
  ssize_t n = dwelf_elf_gnu_build_id(elf_, &id);
  if (n > 0) build_id_.assign(static_cast<const uint8_t*>(id), static_cast<const uint8_t*>(id) + n);
  size_t phnum = 0;
  if (elf_getphdrnum(elf_, &phnum) == 0) {
    for (size_t i = 0; i < phnum; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf_, static_cast<int>(i), &ph) != nullptr && ph.p_type == PT_LOAD) {
        base_svma_ = ph.p_vaddr;
        break;
      }
    }
  }
  return {};
}

// Calls fn(scn, header, name) for each named section until fn returns true; returns that section.
template <typename Fn>
Elf_Scn* ElfObject::find_section(Fn&& fn) const {
  size_t shstrndx;
  if (elf_getshdrstrndx(elf_, &shstrndx) != 0) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn != nullptr; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* n = elf_strptr(elf_, shstrndx, sh.sh_name);
    if (n != nullptr && fn(scn, sh, std::string_view(n))) return scn;
  }
  return nullptr;
}

Elf_Scn* ElfObject::section(std::string_view name) const {
  return find_section([&](Elf_Scn*, const GElf_Shdr&, std::string_view n) { return n == name; });
}

std::optional<std::pair<std::string, uint32_t>> ElfObject::debuglink() const {
  GElf_Word crc = 0;
  const char* name = dwelf_elf_gnu_debuglink(elf_, &crc);
  if (name == nullptr || *name == '\0') return std::nullopt;
  return std::make_pair(std::string(name), static_cast<uint32_t>(crc));
}

std::optional<std::pair<std::string, std::vector<uint8_t>>> ElfObject::debugaltlink() const {
  Elf_Scn* scn = section(".gnu_debugaltlink");
  Elf_Data* d = scn != nullptr ? elf_rawdata(scn, nullptr) : nullptr;
  if (d == nullptr || d->d_buf == nullptr) return std::nullopt;
  // The path, NUL-terminated, then the build ID's bytes up to the end of the section.
  const char* p = static_cast<const char*>(d->d_buf);
  size_t len = ::strnlen(p, d->d_size);
  if (len == 0 || len + 1 >= d->d_size) return std::nullopt;
  const uint8_t* id = reinterpret_cast<const uint8_t*>(p) + len + 1;
  return std::make_pair(std::string(p, len), std::vector<uint8_t>(id, id + (d->d_size - len - 1)));
}

bool ElfObject::decompress_debug_sections() const {
  bool ok = true;
  find_section([&](Elf_Scn* scn, const GElf_Shdr& sh, std::string_view name) {
    if ((sh.sh_flags & SHF_COMPRESSED) != 0 && name.starts_with(".debug_")) ok = elf_compress(scn, 0, 0) >= 0;
    return !ok;
  });
  return ok;
}

uint64_t ElfObject::debug_sections_bytes() const {
  uint64_t total = 0;
  find_section([&](Elf_Scn*, const GElf_Shdr& sh, std::string_view name) {
    if (sh.sh_type == SHT_NOBITS || !name.starts_with(".debug_")) return false;
    auto ch = (sh.sh_flags & SHF_COMPRESSED) != 0 ? compression_header(sh) : std::nullopt;
    total += ch ? ch->size : sh.sh_size;
    return false;
  });
  return total;
}

bool ElfObject::read_at(uint64_t offset, void* out, size_t size) const {
  if (!fd_.valid()) {
    if (offset > image_.size() || size > image_.size() - offset) return false;
    std::memcpy(out, image_.data() + offset, size);
    return true;
  }
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    ssize_t n = ::pread(fd_.get(), p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::optional<ElfObject::CompressionHeader> ElfObject::compression_header(const GElf_Shdr& sh) const {
  CompressionHeader h;
  if (elf64_le_) {
    Elf64_Chdr ch;
    if (sh.sh_size < sizeof ch || !read_at(sh.sh_offset, &ch, sizeof ch)) return std::nullopt;
    h = {ch.ch_type, ch.ch_size, ch.ch_addralign, sizeof ch};
    return h;
  }
  // Another class or byte order: libelf's reader, which converts (and keeps the section's bytes).
  Elf_Scn* scn = find_section([&](Elf_Scn*, const GElf_Shdr& s, std::string_view) {
    return s.sh_offset == sh.sh_offset && s.sh_size == sh.sh_size && s.sh_name == sh.sh_name;
  });
  GElf_Chdr ch;
  if (scn == nullptr || gelf_getchdr(scn, &ch) == nullptr) return std::nullopt;
  h = {ch.ch_type, ch.ch_size, ch.ch_addralign, 0};
  return h;
}

uint64_t ElfObject::symbol_sections_bytes() const {
  uint64_t total = 0;
  find_section([&](Elf_Scn*, const GElf_Shdr& sh, std::string_view name) {
    if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM ||
        (sh.sh_type == SHT_STRTAB && name != ".shstrtab"))
      total += sh.sh_size;
    return false;
  });
  return total;
}

Result<std::string> ElfObject::mini_debug_info() const {
  Elf_Scn* scn = section(".gnu_debugdata");
  if (scn == nullptr) return Err(path_ + " has no .gnu_debugdata");
  Elf_Data* d = elf_rawdata(scn, nullptr);
  if (d == nullptr || d->d_size == 0) return Err(path_ + ": empty .gnu_debugdata");
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, UINT64_MAX, 0) != LZMA_OK) return Err("cannot start the xz decoder");
  std::string out;
  out.resize(d->d_size * 4 + 4096);
  strm.next_in = static_cast<const uint8_t*>(d->d_buf);
  strm.avail_in = d->d_size;
  strm.next_out = reinterpret_cast<uint8_t*>(out.data());
  strm.avail_out = out.size();
  lzma_ret r;
  for (;;) {
    r = lzma_code(&strm, LZMA_FINISH);
    if (r != LZMA_OK) break;
    if (strm.avail_out == 0) {
      size_t used = out.size();
      if (used > (size_t{1} << 31)) {
        r = LZMA_MEMLIMIT_ERROR;
        break;
      }
      out.resize(used * 2);
      strm.next_out = reinterpret_cast<uint8_t*>(out.data()) + used;
      strm.avail_out = out.size() - used;
    }
  }
  size_t total = static_cast<size_t>(strm.total_out);
  lzma_end(&strm);
  if (r != LZMA_STREAM_END)
    return Err(path_ + ": corrupt .gnu_debugdata (xz error " + std::to_string(r) + ")");
  out.resize(total);
  return out;
}

std::vector<uint8_t> ElfObject::code_bytes(uint64_t svma, uint64_t size) const {
  size_t phnum = 0;
  if (elf_getphdrnum(elf_, &phnum) != 0) return {};
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf_, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
    if (svma < ph.p_vaddr || svma - ph.p_vaddr >= ph.p_filesz) continue;
    uint64_t skip = svma - ph.p_vaddr;
    uint64_t off = ph.p_offset + skip;
    uint64_t len = std::min<uint64_t>(size, ph.p_filesz - skip);
    if (!image_.empty() || !fd_.valid()) {
      if (off > image_.size() || len > image_.size() - off) return {};
      return {reinterpret_cast<const uint8_t*>(image_.data()) + off,
              reinterpret_cast<const uint8_t*>(image_.data()) + off + len};
    }
    struct stat now {};
    if (::fstat(fd_.get(), &now) != 0 || now.st_size != opened_.st_size ||
        now.st_mtim.tv_sec != opened_.st_mtim.tv_sec || now.st_mtim.tv_nsec != opened_.st_mtim.tv_nsec)
      return {};  // not the file whose build ID we checked any more
    std::vector<uint8_t> out(static_cast<size_t>(len));
    ssize_t n = ::pread(fd_.get(), out.data(), out.size(), static_cast<off_t>(off));
    if (n < 0 || static_cast<size_t>(n) != out.size()) return {};
    return out;
  }
  return {};
}

void SymbolTable::add_elf_symbols(const ElfObject& obj, uint64_t base_svma) {
  Elf* elf = obj.elf();
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    if (sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr) continue;
    size_t count = sh.sh_size / sh.sh_entsize;
    pending_.reserve(pending_.size() + count);
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) break;
      int type = GELF_ST_TYPE(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE || sym.st_value < base_svma) continue;
      if (type != STT_FUNC && type != STT_GNU_IFUNC) {
        if (type != STT_NOTYPE) continue;
        // Assembly labels: only those in executable sections.
        Elf_Scn* target = elf_getscn(elf, sym.st_shndx);
        GElf_Shdr tsh;
        if (target == nullptr || gelf_getshdr(target, &tsh) == nullptr || !(tsh.sh_flags & SHF_EXECINSTR))
          continue;
      }
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (name == nullptr || *name == '\0') continue;
      if (type == STT_NOTYPE && (name[0] == '$' || (name[0] == '.' && name[1] == 'L'))) continue;
      push({sym.st_value - base_svma, sym.st_size, name}, binding_rank(GELF_ST_BIND(sym.st_info)));
    }
  }
}

void SymbolTable::add_init_fini_symbols(const ElfObject& obj, uint64_t base_svma) {
  for (const char* name : {".init", ".fini"}) {
    Elf_Scn* scn = obj.section(name);
    GElf_Shdr sh;
    if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_PROGBITS ||
        sh.sh_size == 0 || sh.sh_addr < base_svma)
      continue;
    add(sh.sh_addr - base_svma, sh.sh_size, name[1] == 'i' ? "_init" : "_fini");
  }
}

void SymbolTable::add_plt_symbols(const ElfObject& obj, uint64_t base_svma) {
  if (obj.machine() != EM_X86_64) return;
  Elf* elf = obj.elf();
  Elf_Scn* rela = obj.section(".rela.plt");
  Elf_Scn* plt_sec = obj.section(".plt.sec");
  Elf_Scn* plt = plt_sec != nullptr ? plt_sec : obj.section(".plt");
  if (rela == nullptr || plt == nullptr) return;
  GElf_Shdr rsh, psh;
  if (gelf_getshdr(rela, &rsh) == nullptr || gelf_getshdr(plt, &psh) == nullptr) return;
  if (rsh.sh_type != SHT_RELA || rsh.sh_entsize == 0 || psh.sh_type == SHT_NOBITS) return;
  Elf_Scn* dynsym = elf_getscn(elf, rsh.sh_link);
  GElf_Shdr dsh;
  if (dynsym == nullptr || gelf_getshdr(dynsym, &dsh) == nullptr) return;
  Elf_Data* rdata = elf_getdata(rela, nullptr);
  Elf_Data* sdata = elf_getdata(dynsym, nullptr);
  if (rdata == nullptr || sdata == nullptr) return;
  const uint64_t entry = 16;
  uint64_t first = psh.sh_addr + (plt_sec != nullptr ? 0 : entry);  // .plt starts with the resolver stub
  size_t count = rsh.sh_size / rsh.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Rela r;
    if (gelf_getrela(rdata, static_cast<int>(i), &r) == nullptr) break;
    uint64_t addr = first + i * entry;
    if (addr + entry > psh.sh_addr + psh.sh_size || addr < base_svma) break;
    size_t symi = GELF_R_SYM(r.r_info);
    if (symi == 0) continue;  // IRELATIVE: no name
    GElf_Sym sym;
    if (gelf_getsym(sdata, static_cast<int>(symi), &sym) == nullptr) continue;
    const char* name = elf_strptr(elf, dsh.sh_link, sym.st_name);
    if (name == nullptr || *name == '\0') continue;
    names_.push_back(std::string(name) + "@plt");
    push({addr - base_svma, entry, names_.back().c_str()}, 0);
  }
}

void SymbolTable::add(uint64_t start, uint64_t size, std::string name) {
  names_.push_back(std::move(name));
  push({start, size, names_.back().c_str()}, 0);
}

void SymbolTable::push(const Symbol& sym, uint8_t rank) {
  size_t u = 0;
  while (sym.name[u] == '_') ++u;
  const size_t len = u + std::strlen(sym.name + u);
  pending_.push_back({sym, rank, static_cast<uint8_t>(std::min<size_t>(u, 255)),
                      static_cast<uint32_t>(std::min<size_t>(len, UINT32_MAX)),
                      static_cast<uint32_t>(pending_.size())});
}

void SymbolTable::finish() {
  // Aliases at one start get the name perf shows (its choose_best_symbol order): a sized symbol over a
  // label, then global over local over weak (`api` over the static `impl` it aliases, `__libc_write` over
  // the weak `write`), then fewer leading underscores, then the longer name. The kept symbol covers the
  // largest size among them, so no address of the function loses its name.
  // In place (a stable sort's buffer of node's 185,000 symbols was 7 MB to fault in), the order of the adds
  // as the last key: the result is a stable sort's.
  std::sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) {
    if (a.sym.start != b.sym.start) return a.sym.start < b.sym.start;
    if ((a.sym.size > 0) != (b.sym.size > 0)) return a.sym.size > 0;
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.underscores != b.underscores) return a.underscores < b.underscores;
    if (a.length != b.length) return a.length > b.length;
    return a.seq < b.seq;
  });
  symbols_.reserve(symbols_.size() + pending_.size());
  for (const Pending& p : pending_) {
    if (!symbols_.empty() && symbols_.back().start == p.sym.start) {
      symbols_.back().size = std::max(symbols_.back().size, p.sym.size);
      continue;
    }
    symbols_.push_back(p.sym);
  }
  pending_ = {};
  symbols_.shrink_to_fit();
}

const SymbolTable::Symbol* SymbolTable::find(uint64_t rel) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), rel,
                             [](uint64_t v, const Symbol& s) { return v < s.start; });
  if (it == symbols_.begin()) return nullptr;
  const Symbol* s = &*(it - 1);
  if (rel < end_of(s)) return s;
  return nullptr;
}

uint64_t SymbolTable::end_of(const Symbol* s) const {
  if (s->size > 0) return s->start + s->size;
  size_t i = index_of(s);
  if (i + 1 < symbols_.size()) return symbols_[i + 1].start;
  return s->start + 4096;  // the last symbol of unknown size: a page at most
}

size_t SymbolTable::memory_bytes() const {
  size_t n = symbols_.capacity() * sizeof(Symbol);
  for (const auto& s : names_) n += s.capacity() + sizeof(std::string);
  return n;
}

}  // namespace fxprof::symbolizer
