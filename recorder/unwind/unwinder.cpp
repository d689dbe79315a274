// DWARF CFI unwinder (design and numbers in unwinder.h).
#include "recorder/unwind/unwinder.h"

#include <elf.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/fd.h"
#include "elf/elf.h"

namespace fxprof::recorder {

namespace {

// perf_regs.h (x86-64) register numbers, in the bit order perf writes them.
constexpr int kPerfRegBp = 6, kPerfRegSp = 7, kPerfRegIp = 8;
// DWARF x86-64 register numbers.
constexpr uint32_t kDwRbp = 6, kDwRsp = 7, kDwRip = 16;

// ---------------------------------------------------------------------------------------------------------
// Bounds-checked little-endian reading; a malformed file sets `bad` and reads zeros, never past the end.
struct Cursor {
  const uint8_t* p = nullptr;
  const uint8_t* end = nullptr;
  bool bad = false;

  size_t left() const { return static_cast<size_t>(end - p); }
  template <class T>
  T get() {
    T v{};
    if (bad || left() < sizeof(T)) {
      bad = true;
      p = end;
      return v;
    }
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint8_t u8() { return get<uint8_t>(); }
  uint64_t uleb() {
    uint64_t r = 0;
    unsigned shift = 0;
    for (;;) {
      if (p >= end) {
        bad = true;
        return 0;
      }
      uint8_t b = *p++;
      if (shift < 64) r |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) return r;
    }
  }
  int64_t sleb() {
    uint64_t r = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      if (p >= end) {
        bad = true;
        return 0;
      }
      b = *p++;
      if (shift < 64) r |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) r |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(r);
  }
  void skip(uint64_t n) {
    if (bad || left() < n) {
      bad = true;
      p = end;
    } else {
      p += n;
    }
  }
};

// A section's bytes and its address in the binary's own address space (svma).
struct Section {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t vaddr = 0;
  bool empty() const { return data == nullptr || size == 0; }
};

// Bases for DW_EH_PE_* pointer encodings.
struct PtrBase {
  const Section* sec = nullptr;  // pcrel: address of the field itself
  uint64_t data = 0;             // datarel (.eh_frame_hdr address)
};

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

// ---------------------------------------------------------------------------------------------------------
// The compact per-address rule: everything the hot loop needs to step one frame.
struct Rule {
  enum Kind : uint8_t { Invalid, Cfa, End, FramePointer, SigReturn };
  Kind kind = Invalid;
  uint8_t cfa_is_bp = 0;  // CFA = (BP if set, else SP) + cfa_off
  uint8_t bp_saved = 0;   // BP restored from CFA + bp_off (else unchanged)
  int32_t cfa_off = 0;
  int16_t ra_off = 0;
  int16_t bp_off = 0;
};
static_assert(sizeof(Rule) == 12);

struct FdeRef {
  uint64_t pc;
  uint64_t off;  // offset of the FDE in its section
  bool operator<(const FdeRef& o) const { return pc < o.pc; }
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint32_t ra_reg = kDwRip;
  uint8_t fde_enc = 0;
  bool aug_z = false;
  bool signal = false;
  const uint8_t* insns = nullptr;
  const uint8_t* insns_end = nullptr;
};

struct Fde {
  uint64_t pc_begin = 0, pc_end = 0;
  Cie cie;
  const uint8_t* insns = nullptr;
  const uint8_t* insns_end = nullptr;
};

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

// ---------------------------------------------------------------------------------------------------------
// CFA program evaluation for one address into a Rule.
enum RegKind : uint8_t { kSame, kUndef, kOffset, kUnsupported };
struct RegRule {
  RegKind kind = kSame;
  int64_t off = 0;
};
struct CfaState {
  uint32_t cfa_reg = kDwRsp;
  int64_t cfa_off = 8;
  bool cfa_ok = true;
  RegRule ra, bp;
};

// DWARF expression folded at rule time: values are "register + constant" or constants (RIP = the address).
bool fold_cfa_expression(Cursor c, uint64_t addr, uint32_t& reg, int64_t& off) {
  struct Val {
    int reg;  // -1: constant
    int64_t v;
  };
  std::array<Val, 16> st;
  size_t n = 0;
  auto push = [&](Val v) {
    if (n == st.size()) return false;
    st[n++] = v;
    return true;
  };
  while (c.p < c.end && !c.bad) {
    uint8_t op = c.u8();
    if (op >= 0x30 && op <= 0x4f) {  // DW_OP_lit0..31
      if (!push({-1, op - 0x30})) return false;
    } else if (op >= 0x70 && op <= 0x8f) {  // DW_OP_breg0..31
      uint32_t r = op - 0x70;
      int64_t o = c.sleb();
      if (r == kDwRip) {
        if (!push({-1, static_cast<int64_t>(addr) + o})) return false;
      } else if (r == kDwRsp || r == kDwRbp) {
        if (!push({static_cast<int>(r), o})) return false;
      } else {
        return false;
      }
    } else if (op == 0x08 || op == 0x09 || op == 0x0a || op == 0x0b || op == 0x0c || op == 0x0d ||
               op == 0x10 || op == 0x11) {
      int64_t v = 0;
      switch (op) {
        case 0x08:
          v = c.u8();
          break;
        case 0x09:
          v = c.get<int8_t>();
          break;
        case 0x0a:
          v = c.get<uint16_t>();
          break;
        case 0x0b:
          v = c.get<int16_t>();
          break;
        case 0x0c:
          v = c.get<uint32_t>();
          break;
        case 0x0d:
          v = c.get<int32_t>();
          break;
        case 0x10:
          v = static_cast<int64_t>(c.uleb());
          break;
        case 0x11:
          v = c.sleb();
          break;
      }
      if (!push({-1, v})) return false;
    } else if (op == 0x23) {  // DW_OP_plus_uconst
      if (n < 1) return false;
      st[n - 1].v += static_cast<int64_t>(c.uleb());
    } else if (op == 0x12) {  // DW_OP_dup
      if (n < 1 || !push(st[n - 1])) return false;
    } else {
      if (n < 2) return false;
      Val b = st[--n];
      Val& a = st[n - 1];
      uint64_t av = static_cast<uint64_t>(a.v), bv = static_cast<uint64_t>(b.v);
      if (op == 0x22) {  // plus
        if (a.reg >= 0 && b.reg >= 0) return false;
        a = {a.reg >= 0 ? a.reg : b.reg, static_cast<int64_t>(av + bv)};
        continue;
      }
      if (op == 0x1c) {  // minus
        if (b.reg >= 0) return false;
        a.v = static_cast<int64_t>(av - bv);
        continue;
      }
      if (a.reg >= 0 || b.reg >= 0) return false;
      switch (op) {
        case 0x1a:
          a.v = static_cast<int64_t>(av & bv);
          break;  // and
        case 0x21:
          a.v = static_cast<int64_t>(av | bv);
          break;  // or
        case 0x24:
          a.v = bv < 64 ? static_cast<int64_t>(av << bv) : 0;
          break;  // shl
        case 0x25:
          a.v = bv < 64 ? static_cast<int64_t>(av >> bv) : 0;
          break;  // shr
        case 0x1e:
          a.v = static_cast<int64_t>(av * bv);
          break;  // mul
        case 0x29:
          a.v = a.v == b.v;
          break;  // eq
        case 0x2a:
          a.v = a.v >= b.v;
          break;  // ge
        case 0x2b:
          a.v = a.v > b.v;
          break;  // gt
        case 0x2c:
          a.v = a.v <= b.v;
          break;  // le
        case 0x2d:
          a.v = a.v < b.v;
          break;  // lt
        case 0x2e:
          a.v = a.v != b.v;
          break;  // ne
        default:
          return false;
      }
    }
  }
  if (c.bad || n != 1 || st[0].reg < 0) return false;
  reg = static_cast<uint32_t>(st[0].reg);
  off = st[0].v;
  return true;
}

// Runs CFA instructions until the location passes `target`. `initial` is the state after the CIE's program
// (for DW_CFA_restore). Returns false on malformed input.
bool run_cfa(const uint8_t* p, const uint8_t* end, const Cie& cie, const PtrBase& base, uint64_t& loc,
             uint64_t target, CfaState& st, const CfaState& initial) {
  std::array<CfaState, 8> remembered;
  size_t depth = 0;
  Cursor c{p, end};
  auto reg_rule = [&](uint32_t r) -> RegRule* {
    if (r == cie.ra_reg) return &st.ra;
    if (r == kDwRbp) return &st.bp;
    return nullptr;
  };
  auto set = [&](uint32_t r, RegKind k, int64_t off) {
    if (RegRule* rr = reg_rule(r)) *rr = {k, off};
  };
  auto restore = [&](uint32_t r) {
    if (r == cie.ra_reg) st.ra = initial.ra;
    if (r == kDwRbp) st.bp = initial.bp;
  };
  auto advance = [&](uint64_t delta) {
    loc += delta * cie.code_align;
    return loc <= target;
  };
  while (c.p < c.end && !c.bad) {
    uint8_t op = c.u8();
    uint8_t low = op & 0x3f;
    switch (op >> 6) {
      case 1:
        if (!advance(low)) return true;
        continue;
      case 2:
        set(low, kOffset, static_cast<int64_t>(c.uleb()) * cie.data_align);
        continue;
      case 3:
        restore(low);
        continue;
      default:
        break;
    }
    switch (op) {
      case 0x00:
        break;      // nop
      case 0x01: {  // set_loc
        uint64_t a = 0;
        if (!read_encoded(c, cie.fde_enc, base, a)) return false;
        loc = a;
        if (loc > target) return true;
        break;
      }
      case 0x02:
        if (!advance(c.u8())) return true;
        break;
      case 0x03:
        if (!advance(c.get<uint16_t>())) return true;
        break;
      case 0x04:
        if (!advance(c.get<uint32_t>())) return true;
        break;
      case 0x05: {
        uint32_t r = static_cast<uint32_t>(c.uleb());
        set(r, kOffset, static_cast<int64_t>(c.uleb()) * cie.data_align);
        break;
      }
      case 0x06:
        restore(static_cast<uint32_t>(c.uleb()));
        break;
      case 0x07:
        set(static_cast<uint32_t>(c.uleb()), kUndef, 0);
        break;
      case 0x08:
        set(static_cast<uint32_t>(c.uleb()), kSame, 0);
        break;
      case 0x09: {  // register: value lives in another register we do not track
        uint32_t r = static_cast<uint32_t>(c.uleb());
        c.uleb();
        set(r, kUnsupported, 0);
        break;
      }
      case 0x0a:
        if (depth == remembered.size()) return false;
        remembered[depth++] = st;
        break;
      case 0x0b:
        if (depth == 0) return false;
        st = remembered[--depth];
        break;
      case 0x0c:
        st.cfa_reg = static_cast<uint32_t>(c.uleb());
        st.cfa_off = static_cast<int64_t>(c.uleb());
        st.cfa_ok = true;
        break;
      case 0x0d:
        st.cfa_reg = static_cast<uint32_t>(c.uleb());
        st.cfa_ok = true;
        break;
      case 0x0e:
        st.cfa_off = static_cast<int64_t>(c.uleb());
        break;
      case 0x0f: {  // def_cfa_expression
        uint64_t len = c.uleb();
        if (c.bad || len > c.left()) return false;
        uint32_t reg;
        int64_t off;
        st.cfa_ok = fold_cfa_expression(Cursor{c.p, c.p + len}, target, reg, off);
        if (st.cfa_ok) {
          st.cfa_reg = reg;
          st.cfa_off = off;
        }
        c.skip(len);
        break;
      }
      case 0x10:    // expression
      case 0x16: {  // val_expression
        uint32_t r = static_cast<uint32_t>(c.uleb());
        c.skip(c.uleb());
        set(r, kUnsupported, 0);
        break;
      }
      case 0x11: {
        uint32_t r = static_cast<uint32_t>(c.uleb());
        set(r, kOffset, c.sleb() * cie.data_align);
        break;
      }
      case 0x12:
        st.cfa_reg = static_cast<uint32_t>(c.uleb());
        st.cfa_off = c.sleb() * cie.data_align;
        st.cfa_ok = true;
        break;
      case 0x13:
        st.cfa_off = c.sleb() * cie.data_align;
        break;
      case 0x14:
      case 0x15: {  // val_offset(_sf): value = CFA + off (not an address we can restore from)
        uint32_t r = static_cast<uint32_t>(c.uleb());
        if (op == 0x14)
          c.uleb();
        else
          c.sleb();
        set(r, kUnsupported, 0);
        break;
      }
      case 0x2e:
        c.uleb();
        break;      // GNU_args_size
      case 0x2f: {  // GNU_negative_offset_extended
        uint32_t r = static_cast<uint32_t>(c.uleb());
        set(r, kOffset, -static_cast<int64_t>(c.uleb()) * cie.data_align);
        break;
      }
      default:
        return false;
    }
  }
  return !c.bad;
}

Rule rule_from_fde(const Fde& fde, const PtrBase& base, uint64_t addr) {
  Rule fail;
  fail.kind = Rule::FramePointer;
  if (fde.cie.signal) {
    Rule r;
    r.kind = Rule::SigReturn;
    return r;
  }
  CfaState st;
  st.ra = {kUndef, 0};
  uint64_t loc = 0;
  if (!run_cfa(fde.cie.insns, fde.cie.insns_end, fde.cie, base, loc, ~uint64_t{0}, st, st)) return fail;
  CfaState initial = st;
  loc = fde.pc_begin;
  if (!run_cfa(fde.insns, fde.insns_end, fde.cie, base, loc, addr, st, initial)) return fail;
  Rule r;
  if (st.ra.kind == kUndef) {
    r.kind = Rule::End;
    return r;
  }
  if (!st.cfa_ok || (st.cfa_reg != kDwRsp && st.cfa_reg != kDwRbp) || st.ra.kind != kOffset) return fail;
  if (st.cfa_off < INT32_MIN || st.cfa_off > INT32_MAX || st.ra.off < INT16_MIN || st.ra.off > INT16_MAX)
    return fail;
  r.kind = Rule::Cfa;
  r.cfa_is_bp = st.cfa_reg == kDwRbp;
  r.cfa_off = static_cast<int32_t>(st.cfa_off);
  r.ra_off = static_cast<int16_t>(st.ra.off);
  if (st.bp.kind == kOffset && st.bp.off >= INT16_MIN && st.bp.off <= INT16_MAX) {
    r.bp_saved = 1;
    r.bp_off = static_cast<int16_t>(st.bp.off);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// One binary, shared by every process that maps it.
struct Module {
  uint32_t id = 0;
  std::string path;
  bool ok = false;  // has an ELF image we could read (else: frame pointers only)
  MappedFile file;
  std::span<const uint8_t> image;  // the file bytes (or our own vDSO's memory)
  struct Load {
    uint64_t off, vaddr, filesz;
  };
  std::vector<Load> loads;

  Section eh_hdr, eh;
  const uint8_t* table = nullptr;  // .eh_frame_hdr search table (datarel sdata4 pairs)
  size_t table_count = 0;
  std::vector<FdeRef> eh_index;  // when there is no usable table

  elf::Identity identity;  // build ID, segments, debuglink: the one parse shared with the recorder
  bool debug_tried = false;
  MappedFile debug_file;
  std::vector<uint8_t> debug_owned;  // decompressed .debug_frame
  Section dbg;
  std::vector<FdeRef> dbg_index;

  // svma -> pointer to the bytes there (n bytes available), or nullptr.
  const uint8_t* bytes_at(uint64_t svma, size_t n) const {
    for (const Load& l : loads) {
      if (svma >= l.vaddr && svma - l.vaddr + n <= l.filesz) {
        uint64_t off = l.off + (svma - l.vaddr);
        if (off + n <= image.size()) return image.data() + off;
      }
    }
    return nullptr;
  }
};

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

void load_elf(Module& m) {
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
  if (auto id = elf::parse(std::as_bytes(img))) m.identity = std::move(*id);
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
      for (const Module::Load& l : m.loads) {
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

// Loads .debug_frame from the binary itself or its separate debug file (lazily, on the first address
// .eh_frame does not cover).
void load_debug_frame(Module& m, const elf::LocatorOptions& locator) {
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
  // The shared locator: build ID checked, debuglink CRC checked, --symbol-dir searched.
  elf::DebugQuery q{m.path.starts_with('/') ? m.path : std::string(),
                    m.identity.build_id,
                    m.identity.debuglink,
                    m.identity.debuglink_crc,
                    {}};
  elf::locate_debug_file(q, locator, [&](const std::string& p) {
    auto f = map_file(p);
    if (!f.ok()) return false;
    m.debug_file = std::move(f.value());
    auto b = m.debug_file.bytes();
    if (try_image({reinterpret_cast<const uint8_t*>(b.data()), b.size()})) return true;
    m.debug_file = MappedFile{};
    return false;
  });
}

bool find_in_index(const std::vector<FdeRef>& idx, uint64_t svma, uint64_t& off) {
  auto it = std::upper_bound(idx.begin(), idx.end(), FdeRef{svma, 0});
  if (it == idx.begin()) return false;
  off = std::prev(it)->off;
  return true;
}

// The FDE covering `svma` in .eh_frame.
bool find_eh_fde(const Module& m, uint64_t svma, Fde& fde) {
  if (m.eh.empty()) return false;
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
    if (lo == 0) return false;
    int32_t fde_rel;
    std::memcpy(&fde_rel, m.table + (lo - 1) * 8 + 4, 4);
    uint64_t fde_vaddr = m.eh_hdr.vaddr + static_cast<uint64_t>(static_cast<int64_t>(fde_rel));
    if (fde_vaddr < m.eh.vaddr) return false;
    off = fde_vaddr - m.eh.vaddr;
  } else if (!find_in_index(m.eh_index, svma, off)) {
    return false;
  }
  return parse_fde(m.eh, off, true, base, fde) && svma >= fde.pc_begin && svma < fde.pc_end;
}

bool find_debug_fde(Module& m, const elf::LocatorOptions& locator, uint64_t svma, Fde& fde) {
  if (!m.debug_tried) load_debug_frame(m, locator);
  uint64_t off = 0;
  if (m.dbg_index.empty() || !find_in_index(m.dbg_index, svma, off)) return false;
  return parse_fde(m.dbg, off, false, PtrBase{}, fde) && svma >= fde.pc_begin && svma < fde.pc_end;
}

// x86-64 rt_sigreturn trampoline: mov $15,%rax; syscall.
constexpr uint8_t kSigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
// struct ucontext: uc_flags, uc_link, uc_stack (24 bytes), then mcontext gregs (REG_RBP=10, RSP=15, RIP=16).
constexpr uint64_t kUcGregs = 40, kUcRbp = kUcGregs + 10 * 8, kUcRsp = kUcGregs + 15 * 8,
                   kUcRip = kUcGregs + 16 * 8;

Rule compute_rule(Module& m, const elf::LocatorOptions& locator, uint64_t look, uint64_t ip_svma,
                  UnwindStats& stats) {
  Rule r;
  if (const uint8_t* b = m.bytes_at(ip_svma, sizeof kSigreturn);
      b && std::memcmp(b, kSigreturn, sizeof kSigreturn) == 0) {
    r.kind = Rule::SigReturn;
    return r;
  }
  Fde fde;
  if (find_eh_fde(m, look, fde)) return rule_from_fde(fde, PtrBase{&m.eh, m.eh_hdr.vaddr}, look);
  if (find_debug_fde(m, locator, look, fde)) {
    ++stats.debug_frame_rules;
    return rule_from_fde(fde, PtrBase{}, look);
  }
  r.kind = Rule::FramePointer;
  return r;
}

struct MapEntry {
  uint64_t start, end;
  uint64_t bias;  // avma - svma
  Module* module;
};

struct Process {
  std::vector<MapEntry> maps;  // sorted by start, non-overlapping
  const MapEntry* find(uint64_t addr) const {
    auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                               [](uint64_t a, const MapEntry& e) { return a < e.start; });
    if (it == maps.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------
uint64_t user_regs_mask() { return (1ULL << kPerfRegBp) | (1ULL << kPerfRegSp) | (1ULL << kPerfRegIp); }

UserRegs decode_user_regs(std::span<const uint64_t> values) {
  UserRegs r;
  if (values.size() >= 3) {
    r.bp = values[0];
    r.sp = values[1];
    r.ip = values[2];
  }
  return r;
}

struct Unwinder::Impl {
  static constexpr size_t kCacheBits = 13;
  struct Slot {
    uint64_t key = ~uint64_t{0};
    uint32_t module = 0;
    Rule rule;
  };

  std::unordered_map<std::string, std::unique_ptr<Module>> modules;  // key: path + dev/inode/mtime
  std::unordered_map<uint32_t, Process> procs;
  std::vector<Slot> cache = std::vector<Slot>(size_t{1} << kCacheBits);
  UnwindStats stats;
  uint32_t next_module_id = 1;
  elf::LocatorOptions locator;

  Module* module_for(std::string_view path) {
    std::string key(path);
    bool vdso = path == "[vdso]";
    struct stat st {};
    if (!vdso) {
      if (::stat(key.c_str(), &st) != 0) st = {};
      key += '\0' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
             std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec);
    }
    auto& slot = modules[key];
    if (slot) return slot.get();
    slot = std::make_unique<Module>();
    Module& m = *slot;
    m.id = next_module_id++;
    m.path = std::string(path);
    if (vdso) {
      if (auto base = getauxval(AT_SYSINFO_EHDR); base != 0) {
        const auto* p = reinterpret_cast<const uint8_t*>(base);
        Elf64_Ehdr eh;
        std::memcpy(&eh, p, sizeof eh);
        size_t size = eh.e_shoff + size_t{eh.e_shnum} * eh.e_shentsize;
        for (size_t i = 0; i < eh.e_phnum; ++i) {
          Elf64_Phdr ph;
          std::memcpy(&ph, p + eh.e_phoff + i * sizeof ph, sizeof ph);
          if (ph.p_type == PT_LOAD) size = std::max<size_t>(size, ph.p_offset + ph.p_filesz);
        }
        m.image = {p, size};
      }
    } else if (auto f = map_file(m.path); f.ok()) {
      m.file = std::move(f.value());
      auto b = m.file.bytes();
      m.image = {reinterpret_cast<const uint8_t*>(b.data()), b.size()};
    }
    load_elf(m);
    ++stats.modules;
    if (!m.ok) ++stats.modules_failed;
    return &m;
  }

  // Two-way set-associative: the most recently used entry of a set sits first. (Direct-mapped, a Python
  // recording with ~3,000 hot addresses re-evaluated ~7 % of its rules on every pass through conflicts.)
  Rule rule_for(Module& m, uint64_t look, uint64_t ip_svma) {
    uint64_t key = look ^ (look == ip_svma ? 0 : uint64_t{1} << 63);
    uint64_t h = (key ^ (uint64_t{m.id} << 40)) * 0x9E3779B97F4A7C15ull;
    Slot* set = &cache[(h >> (64 - kCacheBits)) & ~size_t{1}];
    if (set[0].key == key && set[0].module == m.id) {
      ++stats.cache_hits;
      return set[0].rule;
    }
    if (set[1].key == key && set[1].module == m.id) {
      ++stats.cache_hits;
      std::swap(set[0], set[1]);
      return set[0].rule;
    }
    ++stats.cache_misses;
    set[1] = set[0];
    set[0] = Slot{key, m.id, compute_rule(m, locator, look, ip_svma, stats)};
    return set[0].rule;
  }
};

Unwinder::Unwinder(elf::LocatorOptions locator) : impl_(std::make_unique<Impl>()) {
  impl_->locator = std::move(locator);
  impl_->locator.use_debuginfod = false;  // never a network fetch on the reading thread
}
Unwinder::~Unwinder() = default;

const UnwindStats& Unwinder::stats() const { return impl_->stats; }

void Unwinder::on_mmap(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, std::string_view path,
                       uint32_t prot) {
  if (len == 0 || path.empty()) return;
  uint64_t end = start + len;
  Process& proc = impl_->procs[pid];
  // A new mapping replaces whatever it overlaps (mmap over, or a re-map after munmap).
  std::vector<MapEntry> kept;
  kept.reserve(proc.maps.size() + 2);
  for (const MapEntry& e : proc.maps) {
    if (e.end <= start || e.start >= end) {
      kept.push_back(e);
      continue;
    }
    if (e.start < start) kept.push_back({e.start, start, e.bias, e.module});
    if (e.end > end) kept.push_back({end, e.end, e.bias, e.module});
  }
  Module* m = impl_->module_for(path);
  // avma - svma, with the segment the kernel mapped here (elf::Identity::mapping_svma: lld layouts).
  auto svma = m->identity.mapping_svma(pgoff, prot);
  uint64_t bias = svma ? start - *svma : start - pgoff;
  kept.push_back({start, end, bias, m});
  std::sort(kept.begin(), kept.end(), [](const MapEntry& a, const MapEntry& b) { return a.start < b.start; });
  proc.maps = std::move(kept);
}

void Unwinder::on_fork(uint32_t parent_pid, uint32_t child_pid) {
  if (parent_pid == child_pid) return;
  auto it = impl_->procs.find(parent_pid);
  if (it != impl_->procs.end())
    impl_->procs[child_pid] = it->second;
  else
    impl_->procs.erase(child_pid);
}

void Unwinder::on_exec(uint32_t pid) { impl_->procs.erase(pid); }
void Unwinder::on_exit(uint32_t pid) { impl_->procs.erase(pid); }

Status Unwinder::load_proc_maps(uint32_t pid) {
  auto text = read_file("/proc/" + std::to_string(pid) + "/maps");
  if (!text.ok()) return std::move(text).take_error();
  std::string_view rest = text.value();
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    // start-end perms offset dev inode path
    unsigned long long start = 0, end = 0, off = 0;
    char perms[8] = {};
    int path_pos = 0;
    std::string l(line);
    if (std::sscanf(l.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &path_pos) < 4)
      continue;
    if (perms[2] != 'x' || path_pos <= 0 || static_cast<size_t>(path_pos) >= l.size()) continue;
    std::string_view path = std::string_view(l).substr(static_cast<size_t>(path_pos));
    if (path.empty() || (path[0] != '/' && path != "[vdso]")) continue;
    on_mmap(pid, start, end - start, off, path);
  }
  return {};
}

UnwindResult Unwinder::unwind(uint32_t pid, const UserRegs& regs, std::span<const std::byte> stack,
                              std::span<uint64_t> out) {
  Impl& im = *impl_;
  UnwindStats& stats = im.stats;
  ++stats.stacks;
  UnwindResult res;
  auto finish = [&](UnwindEnd end) {
    res.end = end;
    stats.frames += res.count;
    switch (end) {
      case UnwindEnd::Complete:
        ++stats.complete;
        break;
      case UnwindEnd::Truncated:
        ++stats.truncated;
        break;
      case UnwindEnd::Failed:
        ++stats.failed;
        break;
    }
    return res;
  };
  if (out.empty()) return finish(UnwindEnd::Truncated);
  const uint64_t stack_lo = regs.sp;
  const uint64_t stack_size = stack.size();
  // Reads 8 bytes of the stack copy; false when outside it.
  auto read = [&](uint64_t addr, uint64_t& v) {
    uint64_t off = addr - stack_lo;
    if (addr < stack_lo || off > stack_size || stack_size - off < 8) return false;
    std::memcpy(&v, stack.data() + off, 8);
    return true;
  };
  // Below the copy is garbage; past its end we cannot tell (Truncated).
  auto read_fail = [&](uint64_t addr) { return addr < stack_lo ? UnwindEnd::Failed : UnwindEnd::Truncated; };

  auto pit = im.procs.find(pid);
  const Process* proc = pit == im.procs.end() ? nullptr : &pit->second;
  uint64_t ip = regs.ip, sp = regs.sp, bp = regs.bp;
  bool exact = true;  // ip is not a return address (first frame, or interrupted by a signal)
  out[res.count++] = ip;
  for (;;) {
    if (res.count >= out.size()) return finish(UnwindEnd::Truncated);
    const MapEntry* me = proc ? proc->find(ip) : nullptr;
    Rule rule;
    if (me && me->module->ok) {
      uint64_t svma = ip - me->bias;
      rule = im.rule_for(*me->module, exact ? svma : svma - 1, svma);
    } else {
      rule.kind = Rule::FramePointer;
    }
    uint64_t new_ip = 0, new_sp = 0, new_bp = bp;
    switch (rule.kind) {
      case Rule::End:
        return finish(UnwindEnd::Complete);
      case Rule::SigReturn: {
        if (!read(sp + kUcRip, new_ip)) return finish(read_fail(sp + kUcRip));
        if (!read(sp + kUcRsp, new_sp) || !read(sp + kUcRbp, new_bp)) return finish(read_fail(sp));
        ++stats.signal_frames;
        if (new_ip == 0) return finish(UnwindEnd::Complete);
        out[res.count++] = new_ip;
        ip = new_ip;
        sp = new_sp;
        bp = new_bp;
        exact = true;
        continue;
      }
      case Rule::Cfa: {
        uint64_t cfa = (rule.cfa_is_bp ? bp : sp) + static_cast<uint64_t>(static_cast<int64_t>(rule.cfa_off));
        uint64_t ra_at = cfa + static_cast<uint64_t>(static_cast<int64_t>(rule.ra_off));
        if (!read(ra_at, new_ip)) return finish(read_fail(ra_at));
        if (rule.bp_saved) {
          // A slot below SP was already popped in an epilogue (GCC does not emit DW_CFA_restore there):
          // BP then holds the caller's value already.
          uint64_t bp_at = cfa + static_cast<uint64_t>(static_cast<int64_t>(rule.bp_off));
          if (bp_at >= sp && !read(bp_at, new_bp)) return finish(read_fail(bp_at));
        }
        new_sp = cfa;
        break;
      }
      case Rule::FramePointer:
      case Rule::Invalid: {
        // Code without usable CFI: [bp] = caller's bp, [bp+8] = return address.
        if (bp < sp || bp == 0) return finish(bp == 0 ? UnwindEnd::Complete : UnwindEnd::Failed);
        if (!read(bp + 8, new_ip) || !read(bp, new_bp)) return finish(read_fail(bp));
        new_sp = bp + 16;
        ++stats.fp_frames;
        break;
      }
    }
    if (new_ip == 0) return finish(UnwindEnd::Complete);
    if (new_sp <= sp) return finish(UnwindEnd::Failed);  // no progress: a loop or garbage
    out[res.count++] = new_ip;
    ip = new_ip;
    sp = new_sp;
    bp = new_bp;
    exact = false;
  }
}

}  // namespace fxprof::recorder
