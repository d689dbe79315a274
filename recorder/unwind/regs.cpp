// The architecture-facing part of the unwinder: which user registers perf samples, and their decoding
// (design in unwinder.h).
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

namespace {
// perf_regs.h (x86-64) register numbers, in the bit order perf writes them.
constexpr int kPerfRegBp = 6, kPerfRegSp = 7, kPerfRegIp = 8;
}  // namespace

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

}  // namespace fxprof::recorder
