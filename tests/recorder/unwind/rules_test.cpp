// Rule evaluation on hand-written CFA programs: the x86-64 prologues compilers emit, remember/restore state,
// the PLT's CFA expression, undefined RA (outermost frame), the signal augmentation, and what falls back.
#include "recorder/unwind/rules.h"

#include <catch2/catch.hpp>
#include <initializer_list>
#include <vector>

using namespace fxprof::recorder::unw;

namespace {

// An FDE over [0x1000, 0x1100) whose CIE says CFA = rsp + 8, RA at CFA - 8 (x86-64's defaults).
// def_cfa rsp+8; offset(rip) cfa-8
constexpr uint8_t kCie[] = {0x0c, 7, 8, 0x90, 1};

struct Program {
  std::vector<uint8_t> cie{std::begin(kCie), std::end(kCie)};
  std::vector<uint8_t> fde;
  bool signal = false;
  Rule at(uint64_t addr) const {
    Fde f;
    f.pc_begin = 0x1000;
    f.pc_end = 0x1100;
    f.cie.code_align = 1;
    f.cie.data_align = -8;
    f.cie.ra_reg = kDwRip;
    f.cie.signal = signal;
    f.cie.insns = cie.data();
    f.cie.insns_end = cie.data() + cie.size();
    f.insns = fde.data();
    f.insns_end = fde.data() + fde.size();
    return rule_from_fde(f, PtrBase{}, addr);
  }
};

}  // namespace

TEST_CASE("rules: push rbp; mov rbp, rsp (the frame-pointer prologue)", "[unwind][rules]") {
  Program p;
  // advance 1; def_cfa_offset 16; offset(rbp) cfa-16; advance 3; def_cfa_register rbp
  p.fde = {0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6};
  Rule r = p.at(0x1000);
  CHECK(r.kind == Rule::Cfa);
  CHECK(r.cfa_reg == kSp);
  CHECK(r.cfa_off == 8);
  CHECK(r.ra_off == -8);
  CHECK(r.how_of(1) == Rule::Same);
  r = p.at(0x1001);
  CHECK(r.cfa_off == 16);
  CHECK(r.how_of(1) == Rule::AtCfa);  // kSaved[1] is BP
  CHECK(r.off[1] == -16);
  r = p.at(0x1004);
  CHECK(r.cfa_reg == kBp);
  CHECK(r.cfa_off == 16);
  r = p.at(0x10ff);
  CHECK(r.cfa_reg == kBp);
}

TEST_CASE("rules: remember_state / restore_state around an early return", "[unwind][rules]") {
  Program p;
  // advance 1; def_cfa_offset 16; remember; advance 4; def_cfa_offset 8; advance 1; restore; (back to 16)
  p.fde = {0x41, 0x0e, 16, 0x0a, 0x44, 0x0e, 8, 0x41, 0x0b};
  CHECK(p.at(0x1001).cfa_off == 16);
  CHECK(p.at(0x1005).cfa_off == 8);  // after the epilogue's pop
  CHECK(p.at(0x1006).cfa_off == 16);
  CHECK(p.at(0x1050).cfa_off == 16);
}

TEST_CASE("rules: the PLT's CFA expression is folded with RIP = the address", "[unwind][rules]") {
  Program p;
  // def_cfa_offset 16; def_cfa_expression: breg7(rsp) 8; breg16(rip) 0; lit15; and; lit11; ge; lit3; shl;
  // plus
  p.fde = {0x0e, 16, 0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
  for (uint64_t a = 0x1000; a < 0x1020; ++a) {
    Rule r = p.at(a);
    INFO("address " << std::hex << a);
    REQUIRE(r.kind == Rule::Cfa);
    CHECK(r.cfa_reg == kSp);
    CHECK(r.cfa_off == ((a & 15) >= 11 ? 16 : 8));
  }
}

TEST_CASE("rules: undefined RA ends the stack; the S augmentation is a signal frame", "[unwind][rules]") {
  Program p;
  p.fde = {0x07, 16};  // undefined(rip)
  CHECK(p.at(0x1000).kind == Rule::End);
  Program s;
  s.signal = true;
  CHECK(s.at(0x1000).kind == Rule::SigReturn);
}

TEST_CASE("rules: what the walk cannot use falls back to frame pointers", "[unwind][rules]") {
  Program p;
  p.fde = {0x0c, 1, 8};  // def_cfa rdx+8: a caller-saved register the walk does not have
  CHECK(p.at(0x1000).kind == Rule::FramePointer);
  Program q;
  q.fde = {0x41, 0x3f};  // an unknown opcode after the address: the rule before it still holds
  CHECK(q.at(0x1000).kind == Rule::Cfa);
  CHECK(q.at(0x1001).kind == Rule::FramePointer);  // reached the bad opcode
  Program t;
  t.fde = {0x0c, 7};  // truncated operand
  CHECK(t.at(0x1000).kind == Rule::FramePointer);
}

TEST_CASE("rules: glibc's lazy-binding trampoline: CFA from RBX, RBX saved", "[unwind][rules]") {
  // _dl_runtime_resolve_xsavec: push rbx (cfa 24, rbx at cfa-24); mov rbx, rsp; def_cfa_register rbx.
  Program p;
  p.cie = {0x0c, 7, 24, 0x90, 3};  // its CIE-level state after the PLT pushed two words: CFA = rsp+24
  p.fde = {0x41, 0x0e, 32, 0x83, 4, 0x43, 0x0d, 3};
  Rule r = p.at(0x1010);
  REQUIRE(r.kind == Rule::Cfa);
  CHECK(r.cfa_reg == kBx);
  CHECK(r.cfa_off == 32);
  CHECK(r.ra_off == -24);
  CHECK(r.how_of(0) == Rule::AtCfa);  // kSaved[0] is BX
  CHECK(r.off[0] == -32);
}

TEST_CASE("rules: every register rule: register, val_offset, expression, val_expression", "[unwind][rules]") {
  Program p;
  // register(r12 <- rbx); val_offset_sf(r13) cfa+16; expression(r14): breg7(rsp)+0 (= CFA - 8);
  // val_expression(r15): breg7(rsp)+8 (= CFA); offset_extended(rbp) cfa-16
  p.fde = {0x09, 12, 3, 0x15, 13, 0x7e, 0x10, 14, 2, 0x77, 0, 0x16, 15, 2, 0x77, 8, 0x05, 6, 2};
  Rule r = p.at(0x1000);
  REQUIRE(r.kind == Rule::Cfa);
  CHECK(r.how_of(2) == Rule::FromReg);
  CHECK(r.off[2] == kBx);
  CHECK(r.how_of(3) == Rule::ValCfa);
  CHECK(r.off[3] == 16);
  CHECK(r.how_of(4) == Rule::AtCfa);
  CHECK(r.off[4] == -8);
  CHECK(r.how_of(5) == Rule::ValCfa);
  CHECK(r.off[5] == 0);
  CHECK(r.how_of(1) == Rule::AtCfa);
  CHECK(r.off[1] == -16);
  CHECK(r.how_of(0) == Rule::Same);
}
