// Binaries as the unwinder sees them (design in module.h).
#include "recorder/unwind/module.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace fxprof::recorder::unw {

namespace {

// x86-64 rt_sigreturn trampoline: mov $15,%rax; syscall.
constexpr uint8_t kSigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

}  // namespace

void open_module(Module& m, const Binary& b) {
  m.path = b.path;
  m.image = {reinterpret_cast<const uint8_t*>(b.image.data()), b.image.size()};
  load_elf(m);
  if (m.ok && b.identity) m.identity = *b.identity;  // parsed once, by the table
}

Rule compute_rule(Module& m, uint64_t look, uint64_t ip_svma, UnwindStats& stats) {
  Rule r;
  if (const uint8_t* b = m.bytes_at(ip_svma, sizeof kSigreturn);
      b && std::memcmp(b, kSigreturn, sizeof kSigreturn) == 0) {
    r.kind = Rule::SigReturn;
    return r;
  }
  Fde fde;
  switch (find_eh_fde(m, look, fde)) {
    case FdeLookup::Found:
      return rule_from_fde(fde, PtrBase{&m.eh, m.eh_hdr.vaddr}, look);
    case FdeLookup::Corrupt:
      r.kind = Rule::Corrupt;
      return r;
    case FdeLookup::None:
      break;
  }
  if (find_debug_fde(m, look, fde)) {
    ++stats.debug_frame_rules;
    return rule_from_fde(fde, PtrBase{}, look);
  }
  r.kind = Rule::FramePointer;
  return r;
}

}  // namespace fxprof::recorder::unw
