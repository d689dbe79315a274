// USDT probes from .note.stapsdt (usdt.h).
#include "elf/usdt.h"

#include <elf.h>
#include <sys/stat.h>

#include <cstring>
#include <optional>

#include "base/fd.h"

namespace fxprof::elf {

namespace {

constexpr uint32_t kNtStapsdt = 3;  // the note type <sys/sdt.h> writes

struct Section {
  std::string_view name;
  uint64_t addr = 0, offset = 0, size = 0;
  uint32_t type = 0;
};

bool in_bounds(std::span<const std::byte> image, uint64_t off, uint64_t size) {
  return off <= image.size() && size <= image.size() - off;
}

Result<std::vector<Section>> sections(std::span<const std::byte> image) {
  if (image.size() >= 2 && std::memcmp(image.data(), "#!", 2) == 0)
    return Err("a script, not an ELF file (name the program that runs it)");
  if (image.size() < sizeof(Elf64_Ehdr) || std::memcmp(image.data(), ELFMAG, SELFMAG) != 0)
    return Err("not an ELF file");
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Err("not a 64-bit ELF file");
  if (eh.e_shoff == 0 || eh.e_shnum == 0) return std::vector<Section>{};  // no section headers: no notes
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum ||
      !in_bounds(image, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)))
    return Err("its section headers lie outside the file");
  auto shdr = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, image.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof s);
    return s;
  };
  const Elf64_Shdr strs = shdr(eh.e_shstrndx);
  std::string_view names;
  if (strs.sh_type != SHT_NOBITS && in_bounds(image, strs.sh_offset, strs.sh_size))
    names = {reinterpret_cast<const char*>(image.data() + strs.sh_offset), strs.sh_size};
  std::vector<Section> out;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr s = shdr(i);
    Section sec{{}, s.sh_addr, s.sh_offset, s.sh_size, s.sh_type};
    if (s.sh_name < names.size()) {
      sec.name = names.substr(s.sh_name);
      sec.name = sec.name.substr(0, sec.name.find('\0'));
    }
    out.push_back(sec);
  }
  return out;
}

// The next NUL-terminated string of `desc` from `pos`, or nullopt when it runs past the end.
std::optional<std::string> take_string(std::string_view desc, size_t& pos) {
  const size_t end = desc.find('\0', pos);
  if (end == std::string_view::npos) return std::nullopt;
  std::string s(desc.substr(pos, end - pos));
  pos = end + 1;
  return s;
}

}  // namespace

Result<std::vector<UsdtArgument>> parse_usdt_arguments(std::string_view text) {
  std::vector<UsdtArgument> out;
  size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] == ' ') {
      ++pos;
      continue;
    }
    const size_t end = std::min(text.find(' ', pos), text.size());
    const std::string_view arg = text.substr(pos, end - pos);
    pos = end;
    const size_t at = arg.find('@');
    UsdtArgument a;
    std::string_view size = arg.substr(0, at == std::string_view::npos ? 0 : at);
    if (size.starts_with('-')) {
      a.is_signed = true;
      size.remove_prefix(1);
    }
    if (size == "1" || size == "2" || size == "4" || size == "8")
      a.size = size[0] - '0';
    else
      return Err("argument '" + std::string(arg) + "' is not SIZE@LOCATION");
    a.location = std::string(arg.substr(at + 1));
    if (a.location.empty()) return Err("argument '" + std::string(arg) + "' has no location");
    out.push_back(std::move(a));
  }
  return out;
}

Result<std::vector<UsdtProbe>> parse_usdt_probes(std::span<const std::byte> image) {
  auto secs = sections(image);
  if (!secs) return std::move(secs).take_error();
  // A prelinked binary moved .stapsdt.base: the notes' addresses move with it.
  std::optional<uint64_t> base_now;
  for (const Section& s : *secs)
    if (s.name == ".stapsdt.base") base_now = s.addr;
  std::vector<UsdtProbe> out;
  for (const Section& s : *secs) {
    if (s.type != SHT_NOTE || s.name != ".note.stapsdt") continue;
    if (!in_bounds(image, s.offset, s.size)) return Err(".note.stapsdt lies outside the file");
    const auto notes = image.subspan(s.offset, s.size);
    uint64_t pos = 0;
    while (pos + sizeof(Elf64_Nhdr) <= notes.size()) {
      Elf64_Nhdr n;
      std::memcpy(&n, notes.data() + pos, sizeof n);
      const uint64_t name_off = pos + sizeof n;
      const uint64_t desc_off = name_off + ((uint64_t{n.n_namesz} + 3) & ~uint64_t{3});
      const uint64_t next = desc_off + ((uint64_t{n.n_descsz} + 3) & ~uint64_t{3});
      if (next > notes.size() || desc_off + n.n_descsz > notes.size())
        return Err(".note.stapsdt: a note runs past its section");
      pos = next;
      if (n.n_type != kNtStapsdt || n.n_namesz != 8 ||
          std::memcmp(notes.data() + name_off, "stapsdt", 8) != 0)
        continue;
      const std::string_view desc(reinterpret_cast<const char*>(notes.data() + desc_off), n.n_descsz);
      if (desc.size() < 24) return Err(".note.stapsdt: a probe note shorter than its three addresses");
      UsdtProbe p;
      uint64_t note_base = 0;
      std::memcpy(&p.address, desc.data(), 8);
      std::memcpy(&note_base, desc.data() + 8, 8);
      std::memcpy(&p.semaphore, desc.data() + 16, 8);
      size_t at = 24;
      auto provider = take_string(desc, at);
      auto name = provider ? take_string(desc, at) : std::nullopt;
      auto args = name ? take_string(desc, at) : std::nullopt;
      if (!args) return Err(".note.stapsdt: a probe's provider, name or arguments is not terminated");
      if (base_now && note_base != 0) {
        p.address += *base_now - note_base;
        if (p.semaphore != 0) p.semaphore += *base_now - note_base;
      }
      p.provider = std::move(*provider);
      p.name = std::move(*name);
      p.arguments = std::move(*args);
      auto parsed = parse_usdt_arguments(p.arguments);
      if (!parsed) return Err(p.provider + ":" + p.name + ": " + parsed.error());
      p.args = std::move(*parsed);
      out.push_back(std::move(p));
    }
  }
  return out;
}

Result<std::vector<UsdtProbe>> read_usdt_probes(const std::string& path) {
  // stat first: opening a FIFO to read would wait for a writer.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Err("cannot open " + path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return Err(path + " is not a regular file");
  auto f = map_file(path);
  if (!f) return std::move(f).take_error();
  auto probes = parse_usdt_probes(f->bytes());
  if (!probes) return Err(path + ": " + probes.error());
  return probes;
}

}  // namespace fxprof::elf
