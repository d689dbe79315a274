#include "recorder/elf_info.h"

#include <elf.h>
#include <sys/auxv.h>

#include <cstring>

#include "base/fd.h"

namespace fxprof::recorder {

namespace {

template <class T>
bool read_at(std::span<const std::byte> image, uint64_t off, T& out) {
  if (off > image.size() || image.size() - off < sizeof(T)) return false;
  std::memcpy(&out, image.data() + off, sizeof(T));
  return true;
}

// Scans a note area for NT_GNU_BUILD_ID.
bool find_build_id(std::span<const std::byte> notes, std::vector<uint8_t>& out) {
  uint64_t pos = 0;
  while (pos + sizeof(Elf64_Nhdr) <= notes.size()) {
    Elf64_Nhdr n;
    std::memcpy(&n, notes.data() + pos, sizeof n);
    uint64_t name_off = pos + sizeof n;
    uint64_t desc_off = name_off + ((n.n_namesz + 3) & ~3u);
    uint64_t next = desc_off + ((n.n_descsz + 3) & ~3u);
    if (next > notes.size() || next <= pos) return false;
    if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 &&
        std::memcmp(notes.data() + name_off, "GNU", 4) == 0 && n.n_descsz > 0) {
      auto* d = reinterpret_cast<const uint8_t*>(notes.data() + desc_off);
      out.assign(d, d + n.n_descsz);
      return true;
    }
    pos = next;
  }
  return false;
}

}  // namespace

std::optional<ElfInfo> parse_elf(std::span<const std::byte> image) {
  Elf64_Ehdr eh;
  if (!read_at(image, 0, eh)) return std::nullopt;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return std::nullopt;
  ElfInfo info;
  bool first_load = true;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!read_at(image, eh.e_phoff + uint64_t{i} * eh.e_phentsize, ph)) break;
    if (ph.p_type == PT_LOAD) {
      if (first_load) info.base_svma = ph.p_vaddr;
      first_load = false;
      info.loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
    } else if (ph.p_type == PT_NOTE && info.build_id.empty()) {
      if (ph.p_offset <= image.size() && image.size() - ph.p_offset >= ph.p_filesz)
        find_build_id(image.subspan(ph.p_offset, ph.p_filesz), info.build_id);
    }
  }
  if (info.build_id.empty() && eh.e_shoff) {  // rare: notes only reachable through section headers
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
      Elf64_Shdr sh;
      if (!read_at(image, eh.e_shoff + uint64_t{i} * eh.e_shentsize, sh)) break;
      if (sh.sh_type == SHT_NOTE && sh.sh_offset <= image.size() &&
          image.size() - sh.sh_offset >= sh.sh_size &&
          find_build_id(image.subspan(sh.sh_offset, sh.sh_size), info.build_id))
        break;
    }
  }
  return info;
}

std::optional<ElfInfo> read_elf_file(const std::string& path) {
  auto f = map_file(path);
  if (!f) return std::nullopt;
  return parse_elf(f->bytes());
}

const std::optional<ElfInfo>& own_vdso() {
  static const std::optional<ElfInfo> info = []() -> std::optional<ElfInfo> {
    auto base = reinterpret_cast<const std::byte*>(getauxval(AT_SYSINFO_EHDR));
    if (!base) return std::nullopt;
    // The image size is not published; bound it by the program headers' extent (the vDSO is a few pages).
    Elf64_Ehdr eh;
    std::memcpy(&eh, base, sizeof eh);
    uint64_t size = eh.e_phoff + uint64_t{eh.e_phnum} * eh.e_phentsize;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, base + eh.e_phoff + uint64_t{i} * eh.e_phentsize, sizeof ph);
      if (ph.p_type == PT_LOAD || ph.p_type == PT_NOTE)
        size = std::max<uint64_t>(size, ph.p_offset + ph.p_filesz);
    }
    auto info = parse_elf(std::span<const std::byte>(base, size));
    return info;
  }();
  return info;
}

uint64_t lib_offset(const ElfInfo& elf, uint64_t pgoff) {
  // The segment whose (page-aligned) file range holds the mapping's file offset gives the bias.
  for (const ElfLoad& l : elf.loads) {
    uint64_t seg_start = l.offset & ~uint64_t{0xfff};
    if (pgoff >= seg_start && pgoff < l.offset + std::max<uint64_t>(l.filesz, 1)) {
      // address(file offset X) = start + (X - pgoff); svma(X) = vaddr + (X - offset).
      // start - base_avma = pgoff + vaddr - offset - base_svma.
      uint64_t v = pgoff + l.vaddr - l.offset;
      if (v >= elf.base_svma) return v - elf.base_svma;
      break;
    }
  }
  return pgoff;
}

model::Lib make_lib(uint64_t start, uint64_t end, uint64_t pgoff, const std::string& path,
                    const ElfInfo* elf) {
  model::Lib lib;
  lib.start = start;
  lib.end = end;
  lib.offset = elf ? lib_offset(*elf, pgoff) : pgoff;
  lib.path = path;
  auto slash = path.rfind('/');
  lib.name = slash == std::string::npos ? path : path.substr(slash + 1);
  lib.debug_name = lib.name;
  lib.debug_path = lib.path;
  if (elf && !elf->build_id.empty()) {
    lib.breakpad_id = model::breakpad_id_from_build_id(elf->build_id);
    lib.code_id = model::code_id_from_build_id(elf->build_id);
  }
  return lib;
}

}  // namespace fxprof::recorder
