#include "recorder/interrupted.h"

#include <algorithm>
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

bool is_exec_function(std::string_view fn) {
  fn = fn.substr(0, fn.find('.'));  // a compiler suffix: do_execveat_common.isra.0
  for (std::string_view name : {"bprm_execve", "do_execveat_common", "do_execve", "__x64_sys_execve",
                                "__x64_sys_execveat", "load_elf_binary", "begin_new_exec"})
    if (fn == name) return true;
  return false;
}

namespace {

// Every stack a sample, allocation, wait or marker refers to, for `fn` to rewrite (stacks are profile-wide
// here: each is visited once per reference).
template <typename Fn>
void for_each_stack_ref(model::Profile& profile, Fn&& fn) {
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads) {
      for (model::Sample& smp : t.samples) fn(smp.stack);
      for (model::Allocation& a : t.allocations) fn(a.stack);
      for (model::Wait& w : t.waits) fn(w.waker_stack);
      for (model::Marker& m : t.markers) fn(m.stack);
    }
}

}  // namespace

size_t mark_exec_frames(model::Profile& profile, const std::unordered_set<model::FrameId>& entries) {
  model::StackTable& stacks = profile.stacks;
  const size_t n = stacks.size();
  std::vector<bool> in_exec(n);
  std::unordered_map<model::StackId, model::StackId> map;
  std::vector<model::FrameId> path;
  for (model::StackId s = 0; s < n; ++s) {
    const model::StackId p = stacks.prefix(s);
    if (p != model::kNoStack && in_exec[p]) {
      in_exec[s] = true;
      if (auto it = map.find(p); it != map.end()) map[s] = stacks.intern(it->second, stacks.frame(s));
      continue;
    }
    const model::Frame& f = profile.frames.get(stacks.frame(s));
    if (f.kind != model::FrameKind::Kernel || f.name == model::kNoString ||
        !is_exec_function(profile.strings.get(f.name)))
      continue;
    in_exec[s] = true;
    path.clear();
    for (model::StackId x = s; x != model::kNoStack; x = stacks.prefix(x)) path.push_back(stacks.frame(x));
    // path is leaf first: the kernel frames, then the user part (if any) up to the root.
    size_t k = 0;
    while (k < path.size() && profile.frames.get(path[k]).kind == model::FrameKind::Kernel) ++k;
    // The new entry point is exact; a stack marked for lost records keeps that mark (quality.h counts it).
    const model::Frame& root = profile.frames.get(path.back());
    if (k == path.size() || entries.contains(path[k]) ||
        (root.kind == model::FrameKind::Label && profile.strings.get(root.name) == kRecordsLostLabel))
      continue;
    path.resize(k);
    path.push_back(profile.label_frame(kExecLabel));
    std::reverse(path.begin(), path.end());
    map[s] = stacks.intern_path(path);
  }
  if (map.empty()) return 0;
  for_each_stack_ref(profile, [&](model::StackId& s) {
    if (s == model::kNoStack || s >= n) return;
    if (auto it = map.find(s); it != map.end()) s = it->second;
  });
  return map.size();
}

size_t mark_interrupted_frames(model::Profile& profile, std::string_view preempted_label,
                               const std::unordered_set<model::FrameId>& exact_already) {
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
    if (p != model::kNoStack && is_user(stacks.frame(p)) && !exact_already.contains(stacks.frame(p)) &&
        interrupted_above(s)) {
      mp = stacks.intern(stacks.prefix(mp), exact_frame(stacks.frame(mp)));
      ++changed;
    }
    map[s] = mp == p ? s : stacks.intern(mp, stacks.frame(s));
  }
  if (changed == 0) return 0;
  auto remap = [&](model::StackId& s) {
    if (s != model::kNoStack && s < n) s = map[s];
  };
  for_each_stack_ref(profile, remap);
  const model::StringId preempted_marker = profile.strings.intern("Preempted");
  for (model::Process& proc : profile.processes)
    for (model::Thread& t : proc.threads)
      for (model::Marker& m : t.markers)
        // A preemption's marker stack without kernel frames ends in the interrupted instruction itself.
        if (m.name == preempted_marker && m.stack != model::kNoStack && is_user(stacks.frame(m.stack)))
          m.stack = stacks.intern(stacks.prefix(m.stack), exact_frame(stacks.frame(m.stack)));
  return changed;
}

}  // namespace fxprof::recorder
