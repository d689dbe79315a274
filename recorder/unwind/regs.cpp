// The architecture-facing part of the unwinder: which user registers perf samples, and their decoding
// (design in unwinder.h).
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

namespace {
// perf_regs.h (x86-64) register numbers; perf writes the sampled ones in this (bit) order.
constexpr int kPerfRegBx = 1, kPerfRegBp = 6, kPerfRegSp = 7, kPerfRegIp = 8, kPerfRegR12 = 20,
              kPerfRegR13 = 21, kPerfRegR14 = 22, kPerfRegR15 = 23;
}  // namespace

uint64_t user_regs_mask() {
  uint64_t m = 0;
  for (int bit :
       {kPerfRegBx, kPerfRegBp, kPerfRegSp, kPerfRegIp, kPerfRegR12, kPerfRegR13, kPerfRegR14, kPerfRegR15})
    m |= uint64_t{1} << bit;
  return m;
}

UserRegs decode_user_regs(std::span<const uint64_t> v) {
  UserRegs r;
  uint64_t* fields[] = {&r.bx, &r.bp, &r.sp, &r.ip, &r.r12, &r.r13, &r.r14, &r.r15};  // bit order
  for (size_t i = 0; i < v.size() && i < 8; ++i) *fields[i] = v[i];
  return r;
}

}  // namespace fxprof::recorder
