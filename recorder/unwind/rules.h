// Rule evaluation: runs a CIE's and an FDE's DW_CFA_* programs up to one address and reduces the resulting
// register state to the compact Rule the stack walk steps with (unwinder.cpp).
//
// Design: evaluating the programs for one address costs a few us (they are walked from the function start),
// and a program hits a few thousand distinct addresses over and over, so the walk caches the Rule per
// (module, address): evaluation runs once per distinct address (python3: 0.07 % of lookups). DWARF
// expressions are folded here, at rule time, with RIP = the address (which covers the PLT's CFA expression).
#pragma once

#include <cstdint>

#include "recorder/unwind/cfi.h"

namespace fxprof::recorder::unw {

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

// The Rule at `addr` (an svma inside the FDE's range); FramePointer when the CFI cannot be used.
Rule rule_from_fde(const Fde& fde, const PtrBase& base, uint64_t addr);

// Folds a DWARF expression to "register + constant" (RIP = addr); false for anything else.
bool fold_cfa_expression(Cursor c, uint64_t addr, uint32_t& reg, int64_t& off);

}  // namespace fxprof::recorder::unw
