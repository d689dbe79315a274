// Call-frame information parsing (design in elf/cfi.h).
#include "elf/cfi.h"

#include <algorithm>

namespace fxprof::elf {

namespace {

// One entry (CIE or FDE) header: returns the body cursor and the entry's end, or false.
bool entry_at(const Section& sec, uint64_t off, Cursor& body, const uint8_t*& id_field, uint64_t& id,
              bool& is64) {
  if (off >= sec.size) return false;
  Cursor c{sec.data + off, sec.data + sec.size};
  uint64_t len = c.get<uint32_t>();
  is64 = false;
  if (len == 0xffffffff) {
    len = c.get<uint64_t>();
    is64 = true;
  }
  if (c.bad || len == 0 || len > c.left()) return false;
  body = Cursor{c.p, c.p + len};
  id_field = body.p;
  id = is64 ? body.get<uint64_t>() : body.get<uint32_t>();
  return !body.bad;
}

}  // namespace

bool read_encoded(Cursor& c, uint8_t enc, const PtrBase& base, uint64_t& out) {
  if (enc == 0xff) return false;  // DW_EH_PE_omit
  uint64_t field = base.sec ? base.sec->vaddr + static_cast<uint64_t>(c.p - base.sec->data) : 0;
  uint64_t v = 0;
  switch (enc & 0x0f) {
    case 0x00:
      v = c.get<uint64_t>();
      break;
    case 0x01:
      v = c.uleb();
      break;
    case 0x02:
      v = c.get<uint16_t>();
      break;
    case 0x03:
      v = c.get<uint32_t>();
      break;
    case 0x04:
      v = c.get<uint64_t>();
      break;
    case 0x09:
      v = static_cast<uint64_t>(c.sleb());
      break;
    case 0x0a:
      v = static_cast<uint64_t>(static_cast<int64_t>(c.get<int16_t>()));
      break;
    case 0x0b:
      v = static_cast<uint64_t>(static_cast<int64_t>(c.get<int32_t>()));
      break;
    case 0x0c:
      v = c.get<uint64_t>();
      break;
    default:
      c.bad = true;
      return false;
  }
  switch (enc & 0x70) {
    case 0x00:
      break;
    case 0x10:
      v += field;
      break;
    case 0x30:
      v += base.data;
      break;
    default:
      c.bad = true;
      return false;  // textrel/funcrel/aligned: not emitted on x86-64 Linux
  }
  out = v;  // DW_EH_PE_indirect (0x80) only appears on personality pointers, whose value we never use
  return !c.bad;
}

bool parse_cie(const Section& sec, uint64_t off, bool eh, const PtrBase& base, Cie& cie) {
  Cursor c;
  const uint8_t* idf;
  uint64_t id;
  bool is64;
  if (!entry_at(sec, off, c, idf, id, is64)) return false;
  uint64_t want = eh ? 0 : (is64 ? ~uint64_t{0} : 0xffffffffu);
  if (id != want) return false;
  uint8_t version = c.u8();
  if (version != 1 && version != 3 && version != 4) return false;
  const uint8_t* aug = c.p;
  while (c.p < c.end && *c.p) ++c.p;
  const uint8_t* aug_end = c.p;
  c.skip(1);
  if (aug_end - aug >= 2 && aug[0] == 'e' && aug[1] == 'h') c.skip(8);  // ancient GCC eh_data
  if (version == 4) {
    uint8_t addr_size = c.u8();
    c.u8();  // segment selector size
    if (addr_size != 8) return false;
  }
  cie.code_align = c.uleb();
  cie.data_align = c.sleb();
  cie.ra_reg = version == 1 ? c.u8() : static_cast<uint32_t>(c.uleb());
  cie.fde_enc = 0;  // absolute 8-byte addresses unless 'R' says otherwise (always so in .debug_frame)
  cie.aug_z = false;
  cie.signal = false;
  if (aug < aug_end && aug[0] == 'z') {
    cie.aug_z = true;
    uint64_t alen = c.uleb();
    if (c.bad || alen > c.left()) return false;
    Cursor a{c.p, c.p + alen};
    for (const uint8_t* q = aug + 1; q < aug_end; ++q) {
      switch (*q) {
        case 'L':
          a.u8();
          break;
        case 'R':
          cie.fde_enc = a.u8();
          break;
        case 'P': {
          uint8_t penc = a.u8();
          uint64_t ignored;
          read_encoded(a, penc & 0x7f, base, ignored);
          break;
        }
        case 'S':
          cie.signal = true;
          break;
        case 'B':
        case 'G':
          break;
        default:
          q = aug_end - 1;
          break;  // unknown: the length lets us skip the rest
      }
    }
    c.skip(alen);
  } else if (aug < aug_end && !(aug_end - aug == 2 && aug[0] == 'e' && aug[1] == 'h')) {
    return false;  // an augmentation we cannot skip without 'z'
  }
  if (c.bad) return false;
  cie.insns = c.p;
  cie.insns_end = c.end;
  return true;
}

bool parse_fde(const Section& sec, uint64_t off, bool eh, const PtrBase& base, Fde& fde) {
  Cursor c;
  const uint8_t* idf;
  uint64_t id;
  bool is64;
  if (!entry_at(sec, off, c, idf, id, is64)) return false;
  uint64_t cie_off;
  if (eh) {
    if (id == 0) return false;  // a CIE
    uint64_t field_off = static_cast<uint64_t>(idf - sec.data);
    if (id > field_off) return false;
    cie_off = field_off - id;
  } else {
    if (id == (is64 ? ~uint64_t{0} : 0xffffffffu)) return false;
    cie_off = id;
  }
  if (!parse_cie(sec, cie_off, eh, base, fde.cie)) return false;
  uint64_t begin = 0, range = 0;
  if (!read_encoded(c, fde.cie.fde_enc, base, begin)) return false;
  if (!read_encoded(c, fde.cie.fde_enc & 0x0f, base, range)) return false;
  fde.pc_begin = begin;
  fde.pc_end = begin + range;
  if (fde.cie.aug_z) c.skip(c.uleb());
  if (c.bad) return false;
  fde.insns = c.p;
  fde.insns_end = c.end;
  return true;
}

// Walks every FDE of a section (for sections without a search table) into a sorted index.
std::vector<FdeRef> index_fdes(const Section& sec, bool eh, const PtrBase& base) {
  std::vector<FdeRef> out;
  uint64_t off = 0;
  while (off + 4 <= sec.size) {
    Cursor c{sec.data + off, sec.data + sec.size};
    uint64_t len = c.get<uint32_t>();
    uint64_t hdr = 4;
    if (len == 0xffffffff) {
      len = c.get<uint64_t>();
      hdr = 12;
    }
    if (c.bad || len == 0 || len > c.left()) break;  // zero terminator (eh_frame) or garbage
    Fde fde;
    if (parse_fde(sec, off, eh, base, fde) && fde.pc_end > fde.pc_begin) out.push_back({fde.pc_begin, off});
    off += hdr + len;
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool find_in_index(const std::vector<FdeRef>& idx, uint64_t pc, uint64_t& off) {
  auto it = std::upper_bound(idx.begin(), idx.end(), FdeRef{pc, 0});
  if (it == idx.begin()) return false;
  off = std::prev(it)->off;
  return true;
}

}  // namespace fxprof::elf
