// The sampled user registers: perf's mask and the decoding of the values in its bit order.
#include <catch2/catch.hpp>
#include <vector>

#include "recorder/unwind/unwinder.h"

using namespace fxprof::recorder;

TEST_CASE("regs: the mask asks for IP, SP and BP, decoded in perf's bit order", "[unwind][regs]") {
  uint64_t mask = user_regs_mask();
  CHECK(mask == ((1u << 6) | (1u << 7) | (1u << 8)));  // perf_regs.h: BP=6, SP=7, IP=8
  std::vector<uint64_t> vals = {0xb0, 0x5b, 0x1b};     // bit order: bp, sp, ip
  UserRegs r = decode_user_regs(vals);
  CHECK(r.bp == 0xb0);
  CHECK(r.sp == 0x5b);
  CHECK(r.ip == 0x1b);
  UserRegs none = decode_user_regs({});
  CHECK(none.ip == 0);
}
