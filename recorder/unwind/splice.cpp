// The frame-pointer splice (design in splice.h).
#include "recorder/unwind/splice.h"

namespace fxprof::recorder {

bool splice_fp_chain(std::span<const uint64_t> unwound, UnwindEnd end, std::span<const uint64_t> fp_chain,
                     std::vector<uint64_t>& out) {
  out.assign(unwound.begin(), unwound.end());
  if (end == UnwindEnd::Complete) return false;
  if (unwound.empty()) return true;
  const uint64_t last = unwound.back();
  // fp_chain[0] is the sample IP (also unwound[0]); an anchor needs at least one entry after it.
  for (size_t j = 1; j + 1 < fp_chain.size(); ++j) {
    if (fp_chain[j] == last) {
      out.insert(out.end(), fp_chain.begin() + static_cast<std::ptrdiff_t>(j + 1), fp_chain.end());
      return false;
    }
  }
  return true;
}

}  // namespace fxprof::recorder
