#include <elf.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/byte_reader.h"
#include "base/fd.h"
#include "elf/elf.h"

namespace fxprof::elf {

namespace {

bool in_bounds(std::span<const std::byte> image, uint64_t off, uint64_t size) {
  return off <= image.size() && size <= image.size() - off;
}

// Scans a note area for NT_GNU_BUILD_ID.
bool find_build_id(std::span<const std::byte> notes, std::vector<uint8_t>& out) {
  uint64_t pos = 0;
  while (pos + sizeof(Elf64_Nhdr) <= notes.size()) {
    Elf64_Nhdr n;
    std::memcpy(&n, notes.data() + pos, sizeof n);
    uint64_t name_off = pos + sizeof n;
    uint64_t desc_off = name_off + ((uint64_t{n.n_namesz} + 3) & ~uint64_t{3});
    uint64_t next = desc_off + ((uint64_t{n.n_descsz} + 3) & ~uint64_t{3});
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

// Section headers: the build ID when no PT_NOTE holds it (debug files), and .gnu_debuglink.
void read_sections(std::span<const std::byte> image, const Elf64_Ehdr& eh, Identity& info) {
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum ||
      !in_bounds(image, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)))
    return;
  auto shdr = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, image.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof s);
    return s;
  };
  Elf64_Shdr strs = shdr(eh.e_shstrndx);
  std::string_view names;
  if (strs.sh_type != SHT_NOBITS && in_bounds(image, strs.sh_offset, strs.sh_size))
    names = {reinterpret_cast<const char*>(image.data() + strs.sh_offset), strs.sh_size};
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr s = shdr(i);
    if (s.sh_type == SHT_NOBITS || !in_bounds(image, s.sh_offset, s.sh_size)) continue;
    auto bytes = image.subspan(s.sh_offset, s.sh_size);
    if (s.sh_type == SHT_NOTE && info.build_id.empty()) {
      find_build_id(bytes, info.build_id);
      continue;
    }
    if (s.sh_name >= names.size()) continue;
    std::string_view name = names.substr(s.sh_name);
    name = name.substr(0, name.find('\0'));
    if (name == ".gnu_debugaltlink") info.dwz_altlink = true;
    if (name == ".gnu_debuglink" && s.sh_size >= 8) {
      // NUL-terminated name, padded to 4 bytes, then the CRC32.
      const char* p = reinterpret_cast<const char*>(bytes.data());
      size_t len = strnlen(p, s.sh_size);
      uint64_t crc_off = (len + 4) & ~uint64_t{3};
      if (len > 0 && len < s.sh_size && crc_off + 4 <= s.sh_size) {
        info.debuglink.assign(p, len);
        std::memcpy(&info.debuglink_crc, bytes.data() + crc_off, 4);
      }
    }
  }
}

bool contains(const Segment& s, uint64_t pgoff) {
  uint64_t page_start = s.offset & ~uint64_t{0xfff};
  return pgoff >= page_start && pgoff < s.offset + std::max<uint64_t>(s.filesz, 1);
}

// DT_INIT and DT_FINI from the dynamic section's entries.
void read_init_fini(std::span<const std::byte> dynamic, Identity& info) {
  for (size_t off = 0; off + sizeof(Elf64_Dyn) <= dynamic.size(); off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    std::memcpy(&d, dynamic.data() + off, sizeof d);
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_INIT) info.init = d.d_un.d_ptr;
    if (d.d_tag == DT_FINI) info.fini = d.d_un.d_ptr;
  }
}

}  // namespace

std::optional<uint64_t> Identity::mapping_svma(uint64_t pgoff, uint32_t prot) const {
  // PF_X is 1, PROT_EXEC is 4: compare meanings, not bits. Only X and W matter (every segment is readable).
  auto matches = [&](const Segment& s) {
    return ((s.flags & PF_X) != 0) == ((prot & PROT_EXEC) != 0) &&
           ((s.flags & PF_W) != 0) == ((prot & PROT_WRITE) != 0);
  };
  const Segment* pick = nullptr;
  for (const Segment& s : loads) {
    if (!contains(s, pgoff)) continue;
    if (matches(s)) {
      pick = &s;
      break;
    }
    if (pick == nullptr) pick = &s;  // no segment has these flags (mprotect'ed code): the first one
  }
  if (pick == nullptr) return std::nullopt;
  // address(file offset X) = start + (X - pgoff); svma(X) = vaddr + (X - offset).
  return pgoff + pick->vaddr - pick->offset;
}

uint64_t Identity::lib_offset(uint64_t pgoff, uint32_t prot) const {
  auto svma = mapping_svma(pgoff, prot);
  if (!svma || *svma < base_svma) return pgoff;
  return *svma - base_svma;
}

std::optional<Identity> parse(std::span<const std::byte> image) {
  Elf64_Ehdr eh;
  if (!read_at(image, 0, eh)) return std::nullopt;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    return std::nullopt;
  Identity info;
  info.machine = eh.e_machine;
  info.entry = eh.e_entry;
  bool first_load = true;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!read_at(image, eh.e_phoff + uint64_t{i} * eh.e_phentsize, ph)) break;
    if (ph.p_type == PT_LOAD) {
      if (first_load) info.base_svma = ph.p_vaddr;
      first_load = false;
      info.loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, ph.p_flags});
    } else if (ph.p_type == PT_DYNAMIC && in_bounds(image, ph.p_offset, ph.p_filesz)) {
      read_init_fini(image.subspan(ph.p_offset, ph.p_filesz), info);
    } else if (ph.p_type == PT_NOTE && info.build_id.empty() && in_bounds(image, ph.p_offset, ph.p_filesz)) {
      find_build_id(image.subspan(ph.p_offset, ph.p_filesz), info.build_id);
    }
  }
  read_sections(image, eh, info);
  return info;
}

std::optional<Identity> read_file(const std::string& path) {
  auto f = map_file(path);
  if (!f) return std::nullopt;
  return parse(f->bytes());
}

std::span<const std::byte> own_vdso_image() {
  static const std::span<const std::byte> image = []() -> std::span<const std::byte> {
    auto base = reinterpret_cast<const std::byte*>(getauxval(AT_SYSINFO_EHDR));
    if (!base) return {};
    // The image size is not published: bound it by the headers' and segments' extent (a few pages).
    Elf64_Ehdr eh;
    std::memcpy(&eh, base, sizeof eh);
    uint64_t size = std::max<uint64_t>(eh.e_phoff + uint64_t{eh.e_phnum} * eh.e_phentsize,
                                       eh.e_shoff + uint64_t{eh.e_shnum} * eh.e_shentsize);
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, base + eh.e_phoff + uint64_t{i} * eh.e_phentsize, sizeof ph);
      if (ph.p_type == PT_LOAD) size = std::max<uint64_t>(size, ph.p_offset + ph.p_filesz);
    }
    return {base, size};
  }();
  return image;
}

const std::optional<Identity>& own_vdso() {
  static const std::optional<Identity> info = []() -> std::optional<Identity> {
    auto image = own_vdso_image();
    if (image.empty()) return std::nullopt;
    return parse(image);
  }();
  return info;
}

std::optional<uint32_t> file_crc32(const std::string& path) {
  // Read, not mapped: a debug file rewritten while we checksum it must not raise SIGBUS.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<Bytef> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    crc = crc32(crc, buf.data(), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

std::string hex(std::span<const uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::string breakpad_id(std::span<const uint8_t> build_id) {
  uint8_t b[16] = {};
  for (size_t i = 0; i < 16 && i < build_id.size(); ++i) b[i] = build_id[i];
  // GUID fields Data1 (4 bytes), Data2 (2), Data3 (2) are little-endian in the build ID bytes.
  const int order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
  std::string out;
  out.reserve(33);
  char hex[3];
  for (int i : order) {
    std::snprintf(hex, sizeof hex, "%02X", b[i]);
    out += hex;
  }
  out += '0';
  return out;
}

}  // namespace fxprof::elf
