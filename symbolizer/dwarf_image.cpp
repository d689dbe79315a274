#include "symbolizer/dwarf_image.h"

#include <libdeflate.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fxprof::symbolizer {

PageBuffer::PageBuffer(size_t size) {
  constexpr size_t kHuge = size_t{2} << 20;
  // Huge pages only pay for a few of them; the slack aligns the data to one.
  const bool huge = size >= kHuge;
  const size_t length = huge ? ((size + kHuge - 1) & ~(kHuge - 1)) + kHuge : size;
  void* m = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;
  map_ = m;
  map_size_ = length;
  auto at = reinterpret_cast<uintptr_t>(m);
  if (huge) {
    at = (at + kHuge - 1) & ~uintptr_t{kHuge - 1};
    ::madvise(reinterpret_cast<void*>(at), (size + kHuge - 1) & ~(kHuge - 1), MADV_HUGEPAGE);
  }
  data_ = reinterpret_cast<char*>(at);
  size_ = size;
}

PageBuffer::~PageBuffer() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

PageBuffer::PageBuffer(PageBuffer&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)),
      map_size_(std::exchange(o.map_size_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

PageBuffer& PageBuffer::operator=(PageBuffer&& o) noexcept {
  if (this != &o) {
    if (map_ != nullptr) ::munmap(map_, map_size_);
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

bool dwarf_section_needed(const char* name) {
  static constexpr std::string_view kUnneeded[] = {
      ".debug_loc",   ".debug_loclists",     ".debug_aranges",      ".debug_frame",
      ".debug_macro", ".debug_macinfo",      ".debug_pubnames",     ".debug_pubtypes",
      ".debug_names", ".debug_gnu_pubnames", ".debug_gnu_pubtypes",
  };
  const std::string_view n(name);
  return n.starts_with(".debug_") &&
         std::find(std::begin(kUnneeded), std::end(kUnneeded), n) == std::end(kUnneeded);
}

namespace {

struct Part {
  GElf_Shdr sh;
  const char* name;
  bool compressed;
  ElfObject::CompressionHeader ch;
  uint64_t size = 0;    // in the image
  uint64_t offset = 0;  // in the image
};

struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

// The .debug_* sections libdw needs, with their sizes once inflated; false when the file is not one to take.
bool plan_parts(const ElfObject& obj, std::vector<Part>& parts) {
  Elf* elf = obj.elf();
  GElf_Ehdr eh;
  size_t shstrndx;
  if (!obj.elf64_little_endian() || gelf_getehdr(elf, &eh) == nullptr ||
      (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) || elf_getshdrstrndx(elf, &shstrndx) != 0)
    return false;
  bool any_compressed = false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) return false;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name == nullptr) continue;
    if (std::strncmp(name, ".zdebug_", 8) == 0) return false;  // GNU-style compression: libdw's
    if (sh.sh_type == SHT_NOBITS || !dwarf_section_needed(name)) continue;
    Part p{sh, name, (sh.sh_flags & SHF_COMPRESSED) != 0, {}};
    if (p.compressed) {
      auto ch = obj.compression_header(sh);
      // zlib only; a stated size beyond zlib's greatest ratio (~1032:1) is a corrupt or hostile header.
      if (!ch || ch->type != ELFCOMPRESS_ZLIB || ch->header_size > sh.sh_size || ch->size / 1100 > sh.sh_size)
        return false;
      p.ch = *ch;
      p.size = ch->size;
      any_compressed = true;
    } else {
      p.size = sh.sh_size;
    }
    parts.push_back(p);
  }
  return any_compressed;
}

}  // namespace

std::unique_ptr<DwarfImage> DwarfImage::inflate(const ElfObject& obj) {
  std::vector<Part> parts;
  if (!plan_parts(obj, parts)) return nullptr;
  // Layout: the ELF header, the sections (8-aligned), the section-name table, the section headers.
  std::string names(1, '\0');
  std::vector<Elf64_Word> name_at;
  uint64_t at = sizeof(Elf64_Ehdr);
  for (Part& p : parts) {
    name_at.push_back(static_cast<Elf64_Word>(names.size()));
    names.append(p.name).push_back('\0');
    at = (at + 7) & ~uint64_t{7};
    p.offset = at;
    at += p.size;
  }
  const auto shstrtab_name = static_cast<Elf64_Word>(names.size());
  names.append(".shstrtab").push_back('\0');
  const uint64_t names_at = at;
  const uint64_t headers_at = (names_at + names.size() + 7) & ~uint64_t{7};
  const size_t count = parts.size() + 2;  // [0] is the null section; the last is .shstrtab
  const uint64_t total = headers_at + count * sizeof(Elf64_Shdr);
  auto img = std::make_unique<DwarfImage>(Key{});
  img->buf_ = PageBuffer(total);
  if (img->buf_.data() == nullptr) return nullptr;
  img->size_ = total;
  char* const buf = img->buf_.data();
  std::unique_ptr<libdeflate_decompressor, DecompressorFree> inflater(libdeflate_alloc_decompressor());
  if (!inflater) return nullptr;
  uint64_t most_packed = 0;
  for (const Part& p : parts)
    if (p.compressed) most_packed = std::max(most_packed, p.sh.sh_size - p.ch.header_size);
  PageBuffer packed(most_packed);  // each compressed section in turn, as read from the file
  if (packed.data() == nullptr) return nullptr;
  for (const Part& p : parts) {
    char* out = buf + p.offset;
    if (!p.compressed) {
      if (!obj.read_at(p.sh.sh_offset, out, p.size)) return nullptr;
      continue;
    }
    const size_t n = p.sh.sh_size - p.ch.header_size;
    size_t got = 0;
    if (!obj.read_at(p.sh.sh_offset + p.ch.header_size, packed.data(), n) ||
        libdeflate_zlib_decompress(inflater.get(), packed.data(), n, out, p.size, &got) !=
            LIBDEFLATE_SUCCESS ||
        got != p.size)
      return nullptr;
  }
  // The gaps the alignment left, and the names and headers.
  uint64_t end = sizeof(Elf64_Ehdr);
  for (const Part& p : parts) {
    std::memset(buf + end, 0, p.offset - end);
    end = p.offset + p.size;
  }
  std::memcpy(buf + names_at, names.data(), names.size());
  std::memset(buf + names_at + names.size(), 0, headers_at - names_at - names.size());
  auto* sh = reinterpret_cast<Elf64_Shdr*>(buf + headers_at);
  std::memset(sh, 0, count * sizeof(Elf64_Shdr));
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    Elf64_Shdr& s = sh[i + 1];
    s.sh_name = name_at[i];
    s.sh_type = p.sh.sh_type;
    s.sh_flags = p.sh.sh_flags & ~static_cast<uint64_t>(SHF_COMPRESSED);
    s.sh_offset = p.offset;
    s.sh_size = p.size;
    s.sh_addralign = 1;
    s.sh_entsize = p.sh.sh_entsize;
  }
  Elf64_Shdr& strtab = sh[count - 1];
  strtab.sh_name = shstrtab_name;
  strtab.sh_type = SHT_STRTAB;
  strtab.sh_offset = names_at;
  strtab.sh_size = names.size();
  strtab.sh_addralign = 1;
  GElf_Ehdr orig;
  gelf_getehdr(obj.elf(), &orig);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, orig.e_ident, EI_NIDENT);
  eh.e_type = orig.e_type;
  eh.e_machine = orig.e_machine;
  eh.e_version = EV_CURRENT;
  eh.e_shoff = headers_at;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<Elf64_Half>(count);
  eh.e_shstrndx = static_cast<Elf64_Half>(count - 1);
  std::memcpy(buf, &eh, sizeof eh);
  img->elf_ = elf_memory(buf, total);
  if (img->elf_ == nullptr) return nullptr;
  return img;
}

DwarfImage::~DwarfImage() {
  if (elf_ != nullptr) elf_end(elf_);
}

}  // namespace fxprof::symbolizer
