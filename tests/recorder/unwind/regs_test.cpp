// The sampled user registers: perf's mask and the decoding of the values in its bit order.
#include <catch2/catch.hpp>
#include <vector>

#include "recorder/unwind/unwinder.h"

using namespace fxprof::recorder;

TEST_CASE("regs: the mask asks for IP, SP and the callee-saved registers, in perf's bit order",
          "[unwind][regs]") {
  uint64_t mask = user_regs_mask();
  // perf_regs.h: BX=1, BP=6, SP=7, IP=8, R12-R15=20-23
  CHECK(mask == ((1u << 1) | (1u << 6) | (1u << 7) | (1u << 8) | (0xfu << 20)));
  std::vector<uint64_t> vals = {0xb1, 0xb0, 0x5b, 0x1b, 12, 13, 14, 15};  // bit order
  UserRegs r = decode_user_regs(vals);
  CHECK(r.bx == 0xb1);
  CHECK(r.bp == 0xb0);
  CHECK(r.sp == 0x5b);
  CHECK(r.ip == 0x1b);
  CHECK(r.r12 == 12);
  CHECK(r.r13 == 13);
  CHECK(r.r14 == 14);
  CHECK(r.r15 == 15);
  UserRegs none = decode_user_regs({});
  CHECK(none.ip == 0);
  UserRegs part = decode_user_regs(std::span(vals).first(3));
  CHECK(part.sp == 0x5b);
  CHECK(part.ip == 0);
}
