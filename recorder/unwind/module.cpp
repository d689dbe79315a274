// Binaries as the unwinder sees them (design in module.h).
#include "recorder/unwind/module.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace fxprof::recorder::unw {

namespace {

// x86-64 rt_sigreturn trampoline: mov $15,%rax; syscall.
constexpr uint8_t kSigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
constexpr uint8_t kSyscall[] = {0x0f, 0x05};

}  // namespace

void open_module(Module& m, const Binary& b) {
  m.path = b.path;
  m.binary = &b;
  m.image = {reinterpret_cast<const uint8_t*>(b.image.data()), b.image.size()};
  load_elf(m);
  if (m.ok && b.identity) m.identity = *b.identity;  // parsed once, by the table
}

namespace {

// The Rule for `look` from the binary's CFI (.eh_frame, then .debug_frame); FramePointer when there is none.
Rule rule_in_cfi(Module& m, uint64_t look, UnwindStats& stats) {
  Rule r;
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

}  // namespace

Rule compute_rule(Module& m, uint64_t look, uint64_t ip_svma, UnwindStats& stats) {
  Rule r;
  if (const uint8_t* b = m.bytes_at(ip_svma, sizeof kSigreturn);
      b && std::memcmp(b, kSigreturn, sizeof kSigreturn) == 0) {
    r.kind = Rule::SigReturn;
    return r;
  }
  r = rule_in_cfi(m, look, stats);
  // The first instruction of _init or _fini (crti's, without CFI; dlopen and exit call them, and a page
  // fault on its first touch stops there): the return address is at SP, as at any function's entry.
  if (r.kind == Rule::FramePointer && look == ip_svma && ip_svma != 0 &&
      (ip_svma == m.identity.init || ip_svma == m.identity.fini)) {
    r.kind = Rule::Cfa;
    r.cfa_reg = kSp;
    r.cfa_off = 8;
    r.ra_off = -8;
    return r;
  }
  // glibc's clone3 ends its FDE before `syscall` (the child's frame differs), so the instruction after it,
  // where a sample taken in the system call has its exact user registers, has no CFI. Nothing moved SP
  // since the instruction before the syscall: that instruction's rule holds in the parent.
  if (r.kind == Rule::FramePointer && look == ip_svma && look > sizeof kSyscall) {
    if (const uint8_t* b = m.bytes_at(ip_svma - sizeof kSyscall, sizeof kSyscall);
        b && std::memcmp(b, kSyscall, sizeof kSyscall) == 0) {
      const Rule before = rule_in_cfi(m, ip_svma - sizeof kSyscall - 1, stats);
      if (before.kind == Rule::Cfa) return before;
    }
  }
  return r;
}

}  // namespace fxprof::recorder::unw
