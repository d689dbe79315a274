// The frame-pointer splice: where a DWARF unwind stopped early (the stack copy ended, or no rule led on),
// the kernel's frame-pointer callchain of the same sample may know the outer frames. Its entries after the
// last address both walks share are appended.
//
// Design: the kernel's chain is only trusted from an address the DWARF walk also found (a return address is
// a strong anchor: the chance that a frame-pointer walk of -O2 code without frame pointers lands on the same
// return address by accident is negligible), so the splice adds outer frames of programs that keep frame
// pointers (main loops, runtimes) and nothing otherwise. It costs one linear scan of the chain (<= 127
// entries, the kernel's default limit) only for stacks that did not complete.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

// Writes the stack to use to `out` (innermost first): `unwound` (result of Unwinder::unwind, out[0] = IP),
// followed, when `end` is not Complete, by the entries of `fp_chain` (the kernel's user callchain, innermost
// first) after the last unwound address. Returns true when the stack is still truncated: the walk did not
// complete and the chain did not share its last address.
bool splice_fp_chain(std::span<const uint64_t> unwound, UnwindEnd end, std::span<const uint64_t> fp_chain,
                     std::vector<uint64_t>& out);

}  // namespace fxprof::recorder
