// Rule evaluation (design in rules.h).
#include "recorder/unwind/rules.h"

#include <array>
#include <optional>

namespace fxprof::recorder::unw {

namespace {

// Factored offsets of malformed CFI can be anything: multiply and negate with two's-complement wrap-around
// (the rule then points nowhere and the walk stops) instead of signed overflow.
int64_t scaled(int64_t v, int64_t align) {
  return static_cast<int64_t>(static_cast<uint64_t>(v) * static_cast<uint64_t>(align));
}
int64_t negated(uint64_t v) { return static_cast<int64_t>(uint64_t{0} - v); }
int64_t wrapped_sum(int64_t a, uint64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + b); }

enum RegKind : uint8_t { kSame, kUndef, kOffset, kValOffset, kRegister, kExpr, kValExpr, kUnsupported };
struct RegRule {
  RegKind kind = kSame;
  uint8_t reg = 0;  // kRegister: the source; kExpr/kValExpr: the base (DWARF numbers)
  int64_t off = 0;
};
constexpr uint32_t kColumns = 17;  // DWARF registers 0-16: the general registers and the return address
struct CfaState {
  uint32_t cfa_reg = kDwRsp;
  int64_t cfa_off = 8;
  bool cfa_ok = true;
  std::array<RegRule, kColumns> regs;
};

// DWARF expression folded at rule time: values are "register + constant" or constants (RIP = the address).
struct Val {
  int reg;  // -1: constant
  int64_t v;
};

// The constant operand of DW_OP_const1u..const8s (0x08-0x0d) and constu/consts (0x10, 0x11); nullopt for
// another opcode.
std::optional<int64_t> constant_operand(uint8_t op, Cursor& c) {
  switch (op) {
    case 0x08:
      return c.u8();
    case 0x09:
      return c.get<int8_t>();
    case 0x0a:
      return c.get<uint16_t>();
    case 0x0b:
      return c.get<int16_t>();
    case 0x0c:
      return c.get<uint32_t>();
    case 0x0d:
      return c.get<int32_t>();
    case 0x10:
      return static_cast<int64_t>(c.uleb());
    case 0x11:
      return c.sleb();
    default:
      return std::nullopt;
  }
}

// A two-operand opcode on the stack's top two values, the result in a; false when it is not one, or its
// operands cannot be folded (a register where only constants can be).
bool binary_op(uint8_t op, Val& a, Val b) {
  uint64_t av = static_cast<uint64_t>(a.v), bv = static_cast<uint64_t>(b.v);
  if (op == 0x22) {  // plus
    if (a.reg >= 0 && b.reg >= 0) return false;
    a = {a.reg >= 0 ? a.reg : b.reg, static_cast<int64_t>(av + bv)};
    return true;
  }
  if (op == 0x1c) {  // minus
    if (b.reg >= 0) return false;
    a.v = static_cast<int64_t>(av - bv);
    return true;
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
  return true;
}

}  // namespace

bool fold_cfa_expression(Cursor c, uint64_t addr, uint32_t& reg, int64_t& off) {
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
        if (!push({-1, wrapped_sum(o, addr)})) return false;
      } else if (reg_from_dwarf(r) != kRegCount) {
        if (!push({static_cast<int>(r), o})) return false;
      } else {
        return false;
      }
    } else if (std::optional<int64_t> v = constant_operand(op, c)) {
      if (!push({-1, *v})) return false;
    } else if (op == 0x23) {  // DW_OP_plus_uconst
      if (n < 1) return false;
      st[n - 1].v = wrapped_sum(st[n - 1].v, c.uleb());
    } else if (op == 0x12) {  // DW_OP_dup
      if (n < 1 || !push(st[n - 1])) return false;
    } else {
      if (n < 2) return false;
      Val b = st[--n];
      if (!binary_op(op, st[n - 1], b)) return false;
    }
  }
  if (c.bad || n != 1 || st[0].reg < 0) return false;
  reg = static_cast<uint32_t>(st[0].reg);
  off = st[0].v;
  return true;
}

namespace {

// Runs CFA instructions until the location passes `target`. `initial` is the state after the CIE's program
// (for DW_CFA_restore). Returns false on malformed input. Long because it is one switch over the DW_CFA
// opcodes: split, the cases would lose their shared cursor, row state and remember stack.
bool run_cfa(const uint8_t* p, const uint8_t* end, const Cie& cie, const PtrBase& base, uint64_t& loc,
             uint64_t target, CfaState& st, const CfaState& initial) {
  std::array<CfaState, 8> remembered;
  size_t depth = 0;
  Cursor c{p, end};
  auto set = [&](uint64_t r, RegKind k, int64_t off, uint32_t src = 0) {
    if (r < kColumns) st.regs[r] = {k, static_cast<uint8_t>(src), off};
  };
  auto restore = [&](uint64_t r) {
    if (r < kColumns) st.regs[r] = initial.regs[r];
  };
  // DW_CFA_expression / val_expression: kept when it folds to "register + constant".
  auto expr = [&](uint64_t r, RegKind k, uint64_t len) {
    if (c.bad || len > c.left()) return false;
    uint32_t base_reg;
    int64_t off;
    if (fold_cfa_expression(Cursor{c.p, c.p + len}, target, base_reg, off))
      set(r, k, off, base_reg);
    else
      set(r, kUnsupported, 0);
    c.skip(len);
    return true;
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
        set(low, kOffset, scaled(static_cast<int64_t>(c.uleb()), cie.data_align));
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
        uint64_t r = c.uleb();
        set(r, kOffset, scaled(static_cast<int64_t>(c.uleb()), cie.data_align));
        break;
      }
      case 0x06:
        restore(c.uleb());
        break;
      case 0x07:
        set(c.uleb(), kUndef, 0);
        break;
      case 0x08:
        set(c.uleb(), kSame, 0);
        break;
      case 0x09: {  // register: the value lives in another register
        uint64_t r = c.uleb();
        uint64_t src = c.uleb();
        if (src < kColumns)
          set(r, kRegister, 0, static_cast<uint32_t>(src));
        else
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
      case 0x10: {  // expression: saved at the folded address
        uint64_t r = c.uleb();
        if (!expr(r, kExpr, c.uleb())) return false;
        break;
      }
      case 0x16: {  // val_expression: the folded value itself
        uint64_t r = c.uleb();
        if (!expr(r, kValExpr, c.uleb())) return false;
        break;
      }
      case 0x11: {
        uint64_t r = c.uleb();
        set(r, kOffset, scaled(c.sleb(), cie.data_align));
        break;
      }
      case 0x12:
        st.cfa_reg = static_cast<uint32_t>(c.uleb());
        st.cfa_off = scaled(c.sleb(), cie.data_align);
        st.cfa_ok = true;
        break;
      case 0x13:
        st.cfa_off = scaled(c.sleb(), cie.data_align);
        break;
      case 0x14: {  // val_offset: value = CFA + off
        uint64_t r = c.uleb();
        set(r, kValOffset, scaled(static_cast<int64_t>(c.uleb()), cie.data_align));
        break;
      }
      case 0x15: {  // val_offset_sf
        uint64_t r = c.uleb();
        set(r, kValOffset, scaled(c.sleb(), cie.data_align));
        break;
      }
      case 0x2e:
        c.uleb();
        break;      // GNU_args_size
      case 0x2f: {  // GNU_negative_offset_extended
        uint64_t r = c.uleb();
        set(r, kOffset, scaled(negated(c.uleb()), cie.data_align));
        break;
      }
      default:
        return false;
    }
  }
  return !c.bad;
}

}  // namespace

Reg reg_from_dwarf(uint64_t dw) {
  switch (dw) {
    case kDwRbx:
      return kBx;
    case kDwRbp:
      return kBp;
    case kDwRsp:
      return kSp;
    case 12:
      return kR12;
    case 13:
      return kR13;
    case 14:
      return kR14;
    case 15:
      return kR15;
    case kDwRip:
      return kIp;
    default:
      return kRegCount;
  }
}

Rule rule_from_fde(const Fde& fde, const PtrBase& base, uint64_t addr) {
  Rule fail;
  fail.kind = Rule::FramePointer;
  if (fde.cie.signal) {
    Rule r;
    r.kind = Rule::SigReturn;
    return r;
  }
  if (fde.cie.ra_reg >= kColumns) return fail;
  CfaState st;
  st.regs[fde.cie.ra_reg] = {kUndef, 0, 0};
  uint64_t loc = 0;
  if (!run_cfa(fde.cie.insns, fde.cie.insns_end, fde.cie, base, loc, ~uint64_t{0}, st, st)) return fail;
  CfaState initial = st;
  loc = fde.pc_begin;
  if (!run_cfa(fde.insns, fde.insns_end, fde.cie, base, loc, addr, st, initial)) return fail;
  Rule r;
  const RegRule& ra = st.regs[fde.cie.ra_reg];
  if (ra.kind == kUndef) {
    r.kind = Rule::End;
    return r;
  }
  const Reg cfa_reg = reg_from_dwarf(st.cfa_reg);
  if (!st.cfa_ok || cfa_reg == kRegCount || cfa_reg == kIp) return fail;
  // An expression based on the CFA's own register is an offset from the CFA.
  auto cfa_relative = [&](const RegRule& rr, int64_t& off) {
    if (rr.kind == kOffset || rr.kind == kValOffset) {
      off = rr.off;
      return true;
    }
    if ((rr.kind == kExpr || rr.kind == kValExpr) && rr.reg == st.cfa_reg) {
      off = wrapped_sum(rr.off, uint64_t{0} - static_cast<uint64_t>(st.cfa_off));
      return true;
    }
    return false;
  };
  auto fits16 = [](int64_t v) { return v >= INT16_MIN && v <= INT16_MAX; };
  if (st.cfa_off < INT32_MIN || st.cfa_off > INT32_MAX) return fail;
  if (ra.kind == kRegister) {  // the return address kept in a register (vfork): scanned for
    r.kind = Rule::RaInRegister;
    r.cfa_reg = cfa_reg;
    r.cfa_off = static_cast<int32_t>(st.cfa_off);
    return r;
  }
  int64_t ra_off = 0;
  if (ra.kind == kValOffset || ra.kind == kValExpr || !cfa_relative(ra, ra_off) || !fits16(ra_off))
    return fail;
  r.kind = Rule::Cfa;
  r.cfa_reg = cfa_reg;
  r.cfa_off = static_cast<int32_t>(st.cfa_off);
  r.ra_off = static_cast<int16_t>(ra_off);
  static constexpr uint32_t kDwSaved[6] = {kDwRbx, kDwRbp, 12, 13, 14, 15};
  for (size_t i = 0; i < 6; ++i) {
    const RegRule& rr = st.regs[kDwSaved[i]];
    int64_t off = 0;
    if (rr.kind == kRegister) {
      Reg src = reg_from_dwarf(rr.reg);
      if (src != kRegCount && src != kIp) r.set(i, Rule::FromReg, static_cast<int16_t>(src));
    } else if (cfa_relative(rr, off) && fits16(off)) {
      bool val = rr.kind == kValOffset || rr.kind == kValExpr;
      r.set(i, val ? Rule::ValCfa : Rule::AtCfa, static_cast<int16_t>(off));
    }
  }
  return r;
}

}  // namespace fxprof::recorder::unw
