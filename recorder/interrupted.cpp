#include "recorder/interrupted.h"

#include <array>
#include <unordered_map>
#include <vector>

#include "model/waits.h"
#include "recorder/offcpu.h"

namespace fxprof::recorder {

bool is_interrupt_entry(std::string_view fn) {
  // 5.8 and later (idtentry): asm_exc_page_fault, asm_sysvec_apic_timer_interrupt, asm_common_interrupt...
  for (std::string_view prefix :
       {"asm_exc_", "asm_sysvec_", "asm_common_interrupt", "asm_spurious_interrupt"})
    if (fn.starts_with(prefix)) return true;
  // Before 5.8 the entry stubs had plain names.
  constexpr std::array<std::string_view, 9> kOld = {"page_fault",
                                                    "async_page_fault",
                                                    "apic_timer_interrupt",
                                                    "common_interrupt",
                                                    "ret_from_intr",
                                                    "reschedule_interrupt",
                                                    "call_function_interrupt",
                                                    "irq_work_interrupt",
                                                    "call_function_single_interrupt"};
  for (std::string_view name : kOld)
    if (fn == name) return true;
  return false;
}

size_t mark_interrupted_frames(model::Profile& profile, std::string_view preempted_label) {
  model::StackTable& stacks = profile.stacks;
  const size_t n = stacks.size();
  std::unordered_map<model::FrameId, model::FrameId> exact;  // user frame -> the same at address + 1
  auto exact_frame = [&](model::FrameId f) {
    auto [it, fresh] = exact.try_emplace(f, f);
    if (fresh) {
      model::Frame copy = profile.frames.get(f);
      ++copy.address;
      it->second = profile.frames.intern(copy);
    }
    return it->second;
  };
  auto is_user = [&](model::FrameId f) {
    const model::Frame& fr = profile.frames.get(f);
    return fr.kind == model::FrameKind::Native && fr.name == model::kNoString;
  };
  // Whether stack `s` is the first frame above the user part of an interrupted stack.
  auto interrupted_above = [&](model::StackId s) {
    const model::Frame& fr = profile.frames.get(stacks.frame(s));
    if (fr.name == model::kNoString) return false;
    const std::string_view name = profile.strings.get(fr.name);
    if (fr.kind == model::FrameKind::Kernel) return is_interrupt_entry(name);
    return fr.kind == model::FrameKind::Label && name == preempted_label;
  };

  // One pass in index order (prefixes first): a stack keeps its index unless a prefix of it changed.
  std::vector<model::StackId> map(n);
  size_t changed = 0;
  for (model::StackId s = 0; s < n; ++s) {
    const model::StackId p = stacks.prefix(s);
    model::StackId mp = p == model::kNoStack ? p : map[p];
    if (p != model::kNoStack && is_user(stacks.frame(p)) && interrupted_above(s)) {
      mp = stacks.intern(stacks.prefix(mp), exact_frame(stacks.frame(mp)));
      ++changed;
    }
    map[s] = mp == p ? s : stacks.intern(mp, stacks.frame(s));
  }
  if (changed == 0) return 0;
  auto remap = [&](model::StackId& s) {
    if (s != model::kNoStack && s < n) s = map[s];
  };
  const model::StringId preempted_marker = profile.strings.intern("Preempted");
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads) {
      for (model::Sample& smp : t.samples) remap(smp.stack);
      for (model::Allocation& a : t.allocations) remap(a.stack);
      for (model::Wait& w : t.waits) remap(w.waker_stack);  // stacks are profile-wide here: once each
      for (model::Marker& m : t.markers) {
        remap(m.stack);
        // A preemption's marker stack without kernel frames ends in the interrupted instruction itself.
        if (m.name == preempted_marker && m.stack != model::kNoStack && is_user(stacks.frame(m.stack)))
          m.stack = stacks.intern(stacks.prefix(m.stack), exact_frame(stacks.frame(m.stack)));
      }
    }
  return changed;
}

}  // namespace fxprof::recorder
