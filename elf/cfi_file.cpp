// One binary's CFI read from its file (design in elf/cfi.h).
#include <elf.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "elf/cfi.h"

namespace fxprof::elf {

namespace {

struct ElfSections {
  Section eh_hdr, eh, debug_frame;
  bool debug_compressed = false;
};

bool in_bounds(std::span<const uint8_t> img, uint64_t off, uint64_t size) {
  return off <= img.size() && size <= img.size() - off;
}

// Reads the section headers we care about from an ELF64 image.
bool read_sections(std::span<const uint8_t> img, ElfSections& out) {
  if (img.size() < sizeof(Elf64_Ehdr)) return false;
  Elf64_Ehdr eh;
  std::memcpy(&eh, img.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return false;
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(img, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)) || eh.e_shstrndx >= eh.e_shnum)
    return true;  // no section headers: fine, PT_GNU_EH_FRAME still works
  auto shdr = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, img.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof s);
    return s;
  };
  Elf64_Shdr strs = shdr(eh.e_shstrndx);
  if (!in_bounds(img, strs.sh_offset, strs.sh_size)) return true;
  std::string_view names(reinterpret_cast<const char*>(img.data() + strs.sh_offset), strs.sh_size);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr s = shdr(i);
    if (s.sh_name >= names.size()) continue;
    std::string_view name = names.substr(s.sh_name);
    name = name.substr(0, name.find('\0'));
    Section sec;
    if (s.sh_type != SHT_NOBITS && in_bounds(img, s.sh_offset, s.sh_size)) {
      sec = {img.data() + s.sh_offset, s.sh_size, s.sh_addr};
    }
    if (name == ".eh_frame_hdr") out.eh_hdr = sec;
    if (name == ".eh_frame") out.eh = sec;
    if (name == ".debug_frame") {
      out.debug_frame = sec;
      out.debug_compressed = (s.sh_flags & SHF_COMPRESSED) != 0;
    }
  }
  return true;
}

}  // namespace

void open_cfi_file(CfiFile& m, std::string_view path) {
  m.path = std::string(path);
  if (path == "[vdso]") {  // same kernel, same image: read our own
    auto v = own_vdso_image();
    m.image = {reinterpret_cast<const uint8_t*>(v.data()), v.size()};
  } else if (auto f = map_file(m.path); f.ok()) {
    m.file = std::move(f.value());
    auto b = m.file.bytes();
    m.image = {reinterpret_cast<const uint8_t*>(b.data()), b.size()};
  }
  load_elf(m);
  // The recorder's table of binaries parses the identity once for all its users (open_module).
  if (m.ok)
    if (auto id = parse(std::as_bytes(m.image))) m.identity = std::move(*id);
}

void load_elf(CfiFile& m) {
  std::span<const uint8_t> img = m.image;
  if (img.size() < sizeof(Elf64_Ehdr)) return;
  Elf64_Ehdr eh;
  std::memcpy(&eh, img.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !in_bounds(img, eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr)))
    return;
  Section hdr_from_phdr;
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, img.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD) m.loads.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
    if (ph.p_type == PT_GNU_EH_FRAME && in_bounds(img, ph.p_offset, ph.p_filesz))
      hdr_from_phdr = {img.data() + ph.p_offset, ph.p_filesz, ph.p_vaddr};
  }
  if (m.loads.empty()) return;
  ElfSections secs;
  read_sections(img, secs);
  m.eh_hdr = !secs.eh_hdr.empty() ? secs.eh_hdr : hdr_from_phdr;
  m.eh = secs.eh;
  // .eh_frame_hdr: version 1, eh_frame_ptr, fde_count, then the table.
  if (!m.eh_hdr.empty() && m.eh_hdr.size >= 4 && m.eh_hdr.data[0] == 1) {
    Cursor c{m.eh_hdr.data + 4, m.eh_hdr.data + m.eh_hdr.size};
    PtrBase base{&m.eh_hdr, m.eh_hdr.vaddr};
    uint8_t ptr_enc = m.eh_hdr.data[1], count_enc = m.eh_hdr.data[2], table_enc = m.eh_hdr.data[3];
    uint64_t eh_ptr = 0, count = 0;
    bool have_ptr = read_encoded(c, ptr_enc, base, eh_ptr);
    bool have_count = have_ptr && read_encoded(c, count_enc, base, count);
    if (have_ptr && m.eh.empty()) {
      // No section headers: .eh_frame runs from eh_frame_ptr to the end of its segment.
      for (const CfiFile::Load& l : m.loads) {
        if (eh_ptr >= l.vaddr && eh_ptr < l.vaddr + l.filesz && in_bounds(img, l.off, l.filesz)) {
          m.eh = {img.data() + l.off + (eh_ptr - l.vaddr), l.filesz - (eh_ptr - l.vaddr), eh_ptr};
        }
      }
    }
    if (have_count && table_enc == 0x3b && count <= c.left() / 8) {
      m.table = c.p;
      m.table_count = count;
    }
  }
  if (!m.eh.empty() && m.table == nullptr)
    m.eh_index = index_fdes(m.eh, true, PtrBase{&m.eh, m.eh_hdr.vaddr});
  m.ok = true;
}

void load_debug_frame(CfiFile& m) {
  m.debug_tried = true;
  auto try_image = [&](std::span<const uint8_t> img) {
    ElfSections secs;
    if (!read_sections(img, secs) || secs.debug_frame.empty()) return false;
    Section df = secs.debug_frame;
    if (secs.debug_compressed) {
      Elf64_Chdr ch;
      if (df.size < sizeof ch) return false;
      std::memcpy(&ch, df.data, sizeof ch);
      if (ch.ch_type != ELFCOMPRESS_ZLIB || ch.ch_size > (1u << 30)) return false;
      m.debug_owned.resize(ch.ch_size);
      uLongf dest = ch.ch_size;
      if (uncompress(m.debug_owned.data(), &dest, df.data + sizeof ch, df.size - sizeof ch) != Z_OK) {
        m.debug_owned.clear();
        return false;
      }
      df = {m.debug_owned.data(), dest, df.vaddr};
    }
    m.dbg = df;
    m.dbg_index = index_fdes(m.dbg, false, PtrBase{});
    return !m.dbg_index.empty();
  };
  if (try_image(m.image)) return;
  // The locator shared with the symbolizer: build ID and debuglink CRC checked, --symbol-dir searched,
  // never debuginfod (no network fetch on the reading thread).
  LocatorOptions options = m.locator != nullptr ? *m.locator : LocatorOptions{};
  options.use_debuginfod = false;
  DebugQuery q{m.path.starts_with('/') ? m.path : std::string(),
               m.identity.build_id,
               m.identity.debuglink,
               m.identity.debuglink_crc,
               {}};
  locate_debug_file(q, options, [&](const std::string& p) {
    auto f = map_file(p);
    if (!f.ok()) return false;
    m.debug_file = std::move(f.value());
    auto b = m.debug_file.bytes();
    if (try_image({reinterpret_cast<const uint8_t*>(b.data()), b.size()})) return true;
    m.debug_file = MappedFile{};
    return false;
  });
}

// The FDE covering `svma` in .eh_frame. An entry of .eh_frame_hdr's table that leads to bytes that do not
// parse as an FDE is a damaged binary, not a gap in the CFI: Corrupt.
FdeLookup find_eh_fde(const CfiFile& m, uint64_t svma, Fde& fde) {
  if (m.eh.empty()) return FdeLookup::None;
  PtrBase base{&m.eh, m.eh_hdr.vaddr};
  uint64_t off = 0;
  if (m.table) {
    // Last entry whose initial location is <= svma.
    size_t lo = 0, hi = m.table_count;
    auto loc_at = [&](size_t i) {
      int32_t v;
      std::memcpy(&v, m.table + i * 8, 4);
      return m.eh_hdr.vaddr + static_cast<uint64_t>(static_cast<int64_t>(v));
    };
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (loc_at(mid) <= svma)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0) return FdeLookup::None;
    int32_t fde_rel;
    std::memcpy(&fde_rel, m.table + (lo - 1) * 8 + 4, 4);
    uint64_t fde_vaddr = m.eh_hdr.vaddr + static_cast<uint64_t>(static_cast<int64_t>(fde_rel));
    if (fde_vaddr < m.eh.vaddr) return FdeLookup::Corrupt;
    off = fde_vaddr - m.eh.vaddr;
    if (!parse_fde(m.eh, off, true, base, fde)) return FdeLookup::Corrupt;
  } else if (!find_in_index(m.eh_index, svma, off) || !parse_fde(m.eh, off, true, base, fde)) {
    return FdeLookup::None;
  }
  return svma >= fde.pc_begin && svma < fde.pc_end ? FdeLookup::Found : FdeLookup::None;
}

bool find_debug_fde(CfiFile& m, uint64_t svma, Fde& fde) {
  if (!m.debug_tried) load_debug_frame(m);
  uint64_t off = 0;
  if (m.dbg_index.empty() || !find_in_index(m.dbg_index, svma, off)) return false;
  return parse_fde(m.dbg, off, false, PtrBase{}, fde) && svma >= fde.pc_begin && svma < fde.pc_end;
}

}  // namespace fxprof::elf
