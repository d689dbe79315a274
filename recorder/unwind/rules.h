// Rule evaluation: runs a CIE's and an FDE's DW_CFA_* programs up to one address and reduces the resulting
// register state to the compact Rule the stack walk steps with (unwinder.cpp).
//
// Design: evaluating the programs for one address costs a few us (they are walked from the function start),
// and a program hits a few thousand distinct addresses over and over, so the walk caches the Rule per
// (module, address): evaluation runs once per distinct address (python3: 0.07 % of lookups). DWARF
// expressions are folded here, at rule time, with RIP = the address (which covers the PLT's CFA expression).
// Every register rule is evaluated (offset, val_offset, register, and expressions that fold to "register +
// constant"), for the callee-saved registers, because a caller's CFA may come from any of them (glibc's lazy
// binding trampoline uses RBX: before, every sample taken during symbol resolution ended there). A rule
// that cannot be represented makes the address "use frame pointers"; a saved register that cannot be is
// left unchanged (what GCC's CFI means for most registers it does not mention).
#pragma once

#include <cstdint>

#include "elf/cfi.h"

namespace fxprof::recorder::unw {

using namespace fxprof::elf;  // CFI reading (elf/cfi.h), shared with the symbolizer

// The walk's register file: x86-64's callee-saved registers, SP and IP. (Caller-saved registers are dead
// at a call, so no caller frame needs them; BX matters beyond "saved": glibc's _dl_runtime_resolve_xsavec
// and other realigning functions compute the CFA from it.)
enum Reg : uint8_t { kBx, kBp, kSp, kR12, kR13, kR14, kR15, kIp, kRegCount };
// The registers a rule restores, in the order of Rule::how/off.
constexpr Reg kSaved[6] = {kBx, kBp, kR12, kR13, kR14, kR15};
// DWARF register number -> Reg (kIp for the return-address column 16); kRegCount when not tracked.
Reg reg_from_dwarf(uint64_t dw);

// The compact per-address rule: everything the hot loop needs to step one frame, 24 bytes so that a 2-way
// cache set (key + rule, twice) is one 64-byte cache line.
struct Rule {
  // Corrupt: the binary's search table points at an FDE that cannot be parsed (a damaged .eh_frame): the
  // walk stops there as failed and the binary is named (its frame pointers, if any, cannot be trusted to
  // tell a complete stack from a wrong one).
  // RaInRegister: the return address is in a register (glibc's vfork pops it into RDI across the system
  // call), which samples do not have: the walk scans the stack for it.
  enum Kind : uint8_t { Invalid, Cfa, End, FramePointer, SigReturn, Corrupt, RaInRegister };
  // How a saved register's caller value is found: unchanged, at CFA + off, = CFA + off, = register `off`.
  enum How : uint8_t { Same = 0, AtCfa = 1, ValCfa = 2, FromReg = 3 };
  Kind kind = Invalid;
  uint8_t cfa_reg = kSp;  // CFA = regs[cfa_reg] + cfa_off
  int16_t ra_off = 0;     // return address at CFA + ra_off
  int32_t cfa_off = 0;
  uint16_t how = 0;  // 2 bits per register of kSaved
  int16_t off[6] = {};

  How how_of(size_t i) const { return static_cast<How>((how >> (2 * i)) & 3); }
  void set(size_t i, How h, int16_t o) {
    how = static_cast<uint16_t>((how & ~(3u << (2 * i))) | (unsigned{h} << (2 * i)));
    off[i] = o;
  }
};
static_assert(sizeof(Rule) == 24);

// The Rule at `addr` (an svma inside the FDE's range); FramePointer when the CFI cannot be used.
Rule rule_from_fde(const Fde& fde, const PtrBase& base, uint64_t addr);

// Folds a DWARF expression to "register + constant" (RIP = addr, `reg` a tracked DWARF register number);
// false for anything else (a deref, an untracked register).
bool fold_cfa_expression(Cursor c, uint64_t addr, uint32_t& reg, int64_t& off);

}  // namespace fxprof::recorder::unw
