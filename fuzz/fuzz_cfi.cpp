// CFI parsing and rule evaluation on a mutated .eh_frame / .debug_frame: every FDE the index finds is parsed
// and its rules are folded at several addresses inside it, as the unwinder does for a sampled PC.
#include <cstddef>
#include <cstdint>

#include "elf/cfi.h"
#include "recorder/unwind/rules.h"

using namespace fxprof::recorder::unw;  // rule_from_fde; the CFI types are elf::'s

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool eh = (data[0] & 1) != 0;
  Section sec{data + 1, size - 1, 0x400000};
  PtrBase base{&sec, 0x500000};
  auto index = index_fdes(sec, eh, base);
  size_t done = 0;
  for (const FdeRef& ref : index) {
    if (++done > 64) break;
    Fde fde;
    if (!parse_fde(sec, ref.off, eh, base, fde)) continue;
    const uint64_t span = fde.pc_end > fde.pc_begin ? fde.pc_end - fde.pc_begin : 0;
    for (uint64_t step : {uint64_t{0}, span / 3, span / 2, span ? span - 1 : 0}) {
      Rule r = rule_from_fde(fde, base, fde.pc_begin + step);
      (void)r;
    }
    uint64_t off = 0;
    (void)find_in_index(index, fde.pc_begin, off);
  }
  return 0;
}
