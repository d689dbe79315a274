#include "symbolizer/dwp.h"

#include <dwarf.h>
#include <elf.h>
#include <gelf.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace fxprof::symbolizer {
namespace {

uint64_t rd(const uint8_t* p, size_t n) {  // little-endian (packages of other byte orders are refused)
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void put(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string hex_id(uint64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, id);
  return buf;
}

// The bytes of a section (decompressed when compressed); empty when absent.
std::span<const uint8_t> section_bytes(const ElfObject& obj, std::string_view name) {
  Elf_Scn* scn = obj.section(name);
  GElf_Shdr sh;
  if (scn == nullptr || gelf_getshdr(scn, &sh) == nullptr || sh.sh_type == SHT_NOBITS) return {};
  if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) return {};
  Elf_Data* d = elf_getdata(scn, nullptr);
  if (d == nullptr || d->d_buf == nullptr) return {};
  return {static_cast<const uint8_t*>(d->d_buf), d->d_size};
}

// A relocatable ELF64 image of named sections: what libdw reads as a .dwo.
std::string elf_image(const std::vector<std::pair<const char*, std::string_view>>& parts, uint16_t machine) {
  std::string img(sizeof(Elf64_Ehdr), '\0');
  std::vector<Elf64_Shdr> shdrs(1);  // [0] is the null section
  std::string names(1, '\0');
  for (const auto& [name, bytes] : parts) {
    Elf64_Shdr sh{};
    sh.sh_name = static_cast<Elf64_Word>(names.size());
    sh.sh_type = SHT_PROGBITS;
    sh.sh_offset = img.size();
    sh.sh_size = bytes.size();
    sh.sh_addralign = 1;
    names.append(name).push_back('\0');
    img.append(bytes);
    shdrs.push_back(sh);
  }
  Elf64_Shdr strtab{};
  strtab.sh_name = static_cast<Elf64_Word>(names.size());
  names.append(".shstrtab").push_back('\0');
  strtab.sh_type = SHT_STRTAB;
  strtab.sh_offset = img.size();
  strtab.sh_size = names.size();
  strtab.sh_addralign = 1;
  img.append(names);
  shdrs.push_back(strtab);
  img.resize((img.size() + 7) & ~size_t{7});
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_REL;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_shoff = img.size();
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<Elf64_Half>(shdrs.size());
  eh.e_shstrndx = static_cast<Elf64_Half>(shdrs.size() - 1);
  img.append(reinterpret_cast<const char*>(shdrs.data()), shdrs.size() * sizeof(Elf64_Shdr));
  std::memcpy(img.data(), &eh, sizeof eh);
  return img;
}

// DWARF 4 range lists (pairs of addresses; (0, 0) ends a list, (~0, a) makes a the base of the rest of it)
// with `base` added to the entries that are relative to the unit's base address.
std::string absolute_ranges(std::string_view lists, uint64_t base, size_t address_size) {
  std::string out(lists);
  const uint64_t all_ones = address_size == 8 ? ~uint64_t{0} : 0xffffffffu;
  bool relative = true;  // until a base address selection entry, in each list
  for (size_t i = 0; i + 2 * address_size <= out.size(); i += 2 * address_size) {
    auto* p = reinterpret_cast<uint8_t*>(out.data()) + i;
    const uint64_t begin = rd(p, address_size), end = rd(p + address_size, address_size);
    if (begin == 0 && end == 0) {
      relative = true;
    } else if (begin == all_ones) {
      relative = false;
    } else if (relative) {
      std::string fixed;
      put(fixed, begin + base, address_size);
      put(fixed, end + base, address_size);
      std::memcpy(p, fixed.data(), fixed.size());
    }
  }
  return out;
}

bool uleb(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void put_uleb(std::string& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(static_cast<char>(v != 0 ? b | 0x80 : b));
  } while (v != 0);
}

// A unit's DWARF 5 range lists (header, offset array, lists) with each offset pair that is relative to the
// unit's base address written as an absolute start and length (DW_RLE_start_length), the offsets moved to
// match. Unchanged when anything in it is not understood.
std::string absolute_rnglists(std::string_view in, uint64_t base, size_t offset_size) {
  const auto* b = reinterpret_cast<const uint8_t*>(in.data());
  const size_t header = offset_size == 8 ? 20 : 12;
  if (in.size() < header) return std::string(in);
  const size_t address_size = b[header - 6];
  const uint64_t count = rd(b + header - 4, 4);
  if ((address_size != 4 && address_size != 8) || count > in.size() ||
      header + count * offset_size > in.size())
    return std::string(in);
  const size_t lists = header + count * offset_size;
  std::string out;
  std::unordered_map<uint64_t, uint64_t> moved;  // old offset -> new, both from the end of the header
  bool relative = true;
  const uint8_t* p = b + lists;
  const uint8_t* end = b + in.size();
  while (p < end) {
    moved[static_cast<uint64_t>(p - b) - header] = lists - header + out.size();
    const uint8_t* entry = p;
    uint64_t x = 0, y = 0;
    bool ok = true;
    switch (*p++) {
      case 0:  // end_of_list
        relative = true;
        break;
      case 1:  // base_addressx
        ok = uleb(p, end, x);
        relative = false;
        break;
      case 2:  // startx_endx
      case 3:  // startx_length
      case 4:  // offset_pair
        ok = uleb(p, end, x) && uleb(p, end, y);
        break;
      case 5:  // base_address
        ok = static_cast<size_t>(end - p) >= address_size;
        p += ok ? address_size : 0;
        relative = false;
        break;
      case 6:  // start_end
        ok = static_cast<size_t>(end - p) >= 2 * address_size;
        p += ok ? 2 * address_size : 0;
        break;
      case 7:  // start_length
        ok = static_cast<size_t>(end - p) >= address_size;
        p += ok ? address_size : 0;
        ok = ok && uleb(p, end, y);
        break;
      default:
        ok = false;
        break;
    }
    if (!ok) return std::string(in);
    if (*entry == 4 && relative && y >= x) {
      out.push_back(7);
      put(out, base + x, address_size);
      put_uleb(out, y - x);
    } else {
      out.append(reinterpret_cast<const char*>(entry), static_cast<size_t>(p - entry));
    }
  }
  moved[static_cast<uint64_t>(p - b) - header] = lists - header + out.size();
  std::string result(in.substr(0, lists));
  for (uint64_t i = 0; i < count; ++i) {
    auto it = moved.find(rd(b + header + i * offset_size, offset_size));
    if (it == moved.end()) return std::string(in);
    std::string o;
    put(o, it->second, offset_size);
    result.replace(header + i * offset_size, offset_size, o);
  }
  result += out;
  std::string length;  // the unit length, after the length field itself
  put(length, result.size() - (offset_size == 8 ? 12 : 4), offset_size);
  result.replace(offset_size == 8 ? 4 : 0, offset_size, length);
  return result;
}

}  // namespace

SplitUnit::~SplitUnit() {
  if (dw_ != nullptr) dwarf_end(dw_);
}

Result<std::unique_ptr<DwpPackage>> DwpPackage::open(const std::string& path) {
  auto obj = ElfObject::open(path);
  if (!obj) return std::move(obj).take_error();
  std::unique_ptr<DwpPackage> pkg(new DwpPackage());
  pkg->obj_ = std::move(obj).value();
  GElf_Ehdr eh;
  if (gelf_getehdr(pkg->obj_->elf(), &eh) == nullptr || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return Err(path + " is not a little-endian ELF file");
  const std::span<const uint8_t> index = section_bytes(*pkg->obj_, ".debug_cu_index");
  if (index.empty()) return Err(path + " has no .debug_cu_index (not a split DWARF package)");
  const char* names[kCount] = {".debug_info.dwo", ".debug_abbrev.dwo", ".debug_line.dwo",
                               ".debug_str_offsets.dwo", ".debug_rnglists.dwo"};
  for (int k = 0; k < kCount; ++k) pkg->sections_[k] = section_bytes(*pkg->obj_, names[k]);
  pkg->str_ = section_bytes(*pkg->obj_, ".debug_str.dwo");

  // Header: version (2 = GNU's for DWARF 4, 5 = DWARF 5; a 32-bit word, or 16 bits and padding), the number
  // of columns (sections), of units and of hash slots; then the slots' DWO ids, their row numbers (1-based,
  // 0 = empty), the columns' DW_SECT_* numbers, and a table of offsets and one of sizes, a row per unit.
  const uint8_t* p = index.data();
  if (index.size() < 16) return Err(path + ": .debug_cu_index is truncated");
  const uint64_t version = rd(p, 2), ncols = rd(p + 4, 4), nunits = rd(p + 8, 4), nslots = rd(p + 12, 4);
  if (version != 2 && version != 5)
    return Err(path + ": .debug_cu_index version " + std::to_string(version) + " is not 2 or 5");
  const uint64_t ids = 16 + nslots * 12, offs = ids + ncols * 4, sizes = offs + nunits * ncols * 4;
  if (ncols > 64 || nslots > index.size() || nunits > index.size() ||
      sizes + nunits * ncols * 4 > index.size())
    return Err(path + ": .debug_cu_index is truncated");
  int col_sect[64];
  for (uint64_t c = 0; c < ncols; ++c) {
    // DW_SECT_INFO 1, ABBREV 3, LINE 4, STR_OFFSETS 6 in both versions; RNGLISTS 8 in version 5 only.
    switch (rd(p + ids + c * 4, 4)) {
      case 1:
        col_sect[c] = kInfo;
        break;
      case 3:
        col_sect[c] = kAbbrev;
        break;
      case 4:
        col_sect[c] = kLine;
        break;
      case 6:
        col_sect[c] = kStrOffsets;
        break;
      case 8:
        col_sect[c] = version == 5 ? kRnglists : -1;
        break;
      default:
        col_sect[c] = -1;
        break;
    }
  }
  for (uint64_t s = 0; s < nslots; ++s) {
    const uint64_t row = rd(p + 16 + nslots * 8 + s * 4, 4);
    if (row == 0 || row > nunits) continue;
    Row r;
    for (uint64_t c = 0; c < ncols; ++c) {
      if (col_sect[c] < 0) continue;
      r.off[col_sect[c]] = static_cast<uint32_t>(rd(p + offs + ((row - 1) * ncols + c) * 4, 4));
      r.size[col_sect[c]] = static_cast<uint32_t>(rd(p + sizes + ((row - 1) * ncols + c) * 4, 4));
    }
    pkg->rows_.emplace(rd(p + 16 + s * 8, 8), r);
  }
  return pkg;
}

Result<std::unique_ptr<SplitUnit>> DwpPackage::unit(const Skeleton& skeleton) const {
  auto it = rows_.find(skeleton.dwo_id);
  if (it == rows_.end()) return Err(path() + " has no unit with DWO id " + hex_id(skeleton.dwo_id));
  const Row& row = it->second;
  std::string_view slice[kCount];
  for (int k = 0; k < kCount; ++k) {
    if (uint64_t{row.off[k]} + row.size[k] > sections_[k].size())
      return Err(path() + ": the unit with DWO id " + hex_id(skeleton.dwo_id) +
                 " lies outside the package's sections");
    slice[k] = {reinterpret_cast<const char*>(sections_[k].data()) + row.off[k], row.size[k]};
  }
  const std::string_view info = slice[kInfo];
  if (info.size() < 24)
    return Err(path() + ": the unit with DWO id " + hex_id(skeleton.dwo_id) + " is truncated");
  const auto* ip = reinterpret_cast<const uint8_t*>(info.data());
  const size_t offset_size = rd(ip, 4) == 0xffffffff ? 8 : 4;
  const uint64_t unit_version = rd(ip + (offset_size == 8 ? 12 : 4), 2);

  // The unit's string offsets (after their DWARF 5 header) into a .debug_str.dwo of its own strings.
  const std::string_view so = slice[kStrOffsets];
  size_t header = unit_version >= 5 ? (offset_size == 8 ? 16 : 8) : 0;
  if (header > so.size()) header = so.size();
  std::string offsets(so.substr(0, header)), strings(1, '\0');  // offset 0: "" for offsets out of range
  std::unordered_map<uint64_t, uint64_t> moved;
  for (size_t i = header; i + offset_size <= so.size(); i += offset_size) {
    const uint64_t old = rd(reinterpret_cast<const uint8_t*>(so.data()) + i, offset_size);
    auto [m, fresh] = moved.try_emplace(old, 0);
    if (fresh && old < str_.size()) {
      const char* s = reinterpret_cast<const char*>(str_.data()) + old;
      m->second = strings.size();
      strings.append(s, strnlen(s, str_.size() - old)).push_back('\0');
    }
    put(offsets, m->second, offset_size);
  }

  // Range lists' offset pairs are relative to the unit's base address, the skeleton's DW_AT_low_pc.
  std::string rnglists(slice[kRnglists]);
  if (unit_version >= 5 && skeleton.low_pc != 0)
    rnglists = absolute_rnglists(slice[kRnglists], skeleton.low_pc, offset_size);
  std::vector<std::pair<const char*, std::string_view>> parts = {
      {".debug_info.dwo", info},         {".debug_abbrev.dwo", slice[kAbbrev]},
      {".debug_line.dwo", slice[kLine]}, {".debug_str_offsets.dwo", offsets},
      {".debug_str.dwo", strings},       {".debug_rnglists.dwo", rnglists}};
  auto chars = [](std::span<const uint8_t> s) {
    return std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
  };
  if (!skeleton.addr.empty()) parts.emplace_back(".debug_addr.dwo", chars(skeleton.addr));
  const size_t address_size = unit_version < 5 ? ip[offset_size == 8 ? 18 : 10] : 8;
  std::string ranges;
  if (!skeleton.ranges.empty() && (address_size == 4 || address_size == 8)) {
    ranges = absolute_ranges(chars(skeleton.ranges), skeleton.low_pc, address_size);
    parts.emplace_back(".debug_ranges.dwo", ranges);
  }
  std::erase_if(parts, [](const auto& part) { return part.second.empty(); });

  const std::string label = path() + "[" + hex_id(skeleton.dwo_id) + "]";
  auto image = ElfObject::from_memory(elf_image(parts, obj_->machine()), label);
  if (!image) return std::move(image).take_error();
  std::unique_ptr<SplitUnit> unit(new SplitUnit());
  unit->image_ = std::move(image).value();
  unit->bytes_ = unit->image_->owned_bytes();
  unit->dw_ = dwarf_begin_elf(unit->image_->elf(), DWARF_C_READ, nullptr);
  if (unit->dw_ == nullptr) return Err(label + ": " + dwarf_errmsg(-1));
  Dwarf_CU* cu = nullptr;
  uint8_t unit_type = 0;
  uint64_t id = 0;
  if (dwarf_get_units(unit->dw_, nullptr, &cu, nullptr, &unit_type, &unit->die_, nullptr) != 0 ||
      dwarf_cu_info(cu, nullptr, nullptr, nullptr, nullptr, &id, nullptr, nullptr) != 0 ||
      unit_type != DW_UT_split_compile || id != skeleton.dwo_id)
    return Err(label + ": not the split compile unit of that DWO id");
  return unit;
}

}  // namespace fxprof::symbolizer
