// Interrupted instructions (recorder/interrupted.h): the user frame under an interrupt or exception entry is
// moved to address + 1, so that every caller lookup (address - 1) lands on it; under a system call it stays.
#include "recorder/interrupted.h"

#include <catch2/catch.hpp>
#include <unordered_set>
#include <vector>

#include "model/profile.h"

using namespace fxprof;
using namespace fxprof::recorder;

namespace {
model::FrameId kernel(model::Profile& p, const char* name) {
  model::Frame f{0xffffffff81000000ull + p.frames.size(), p.strings.intern(name), model::FrameKind::Kernel,
                 model::Category::Kernel};
  return p.frames.intern(f);
}
uint64_t user_address_under(const model::Profile& p, model::StackId s) {
  while (p.frames.get(p.stacks.frame(s)).kind != model::FrameKind::Native) s = p.stacks.prefix(s);
  return p.frames.get(p.stacks.frame(s)).address;
}
}  // namespace

TEST_CASE("interrupted: the kernel entry frame says whether the kernel was entered by an interrupt",
          "[recorder][interrupted]") {
  for (const char* name : {"asm_exc_page_fault", "asm_sysvec_apic_timer_interrupt", "asm_common_interrupt",
                           "asm_sysvec_reschedule_ipi", "page_fault", "apic_timer_interrupt"})
    CHECK(is_interrupt_entry(name));
  for (const char* name : {"entry_SYSCALL_64_after_hwframe", "entry_SYSCALL_64", "do_syscall_64",
                           "ret_from_fork", "exc_page_fault", ""})
    CHECK_FALSE(is_interrupt_entry(name));
}

TEST_CASE("interrupted: the user frame under an exception or a preemption is looked up at its own address",
          "[recorder][interrupted]") {
  model::Profile p;
  p.processes.emplace_back();
  model::Thread& t = p.processes[0].threads.emplace_back();
  const model::FrameId main_f = p.native_frame(0x5000), ip = p.native_frame(0x6000);
  const model::FrameId fault = kernel(p, "asm_exc_page_fault"), handler = kernel(p, "handle_mm_fault");
  const model::FrameId syscall = kernel(p, "entry_SYSCALL_64_after_hwframe"), read = kernel(p, "ksys_read");
  const model::FrameId preempted = p.label_frame("[preempted]", model::Category::Idle);
  const model::StackId faulted = p.stacks.intern_path(std::vector{main_f, ip, fault, handler});
  const model::StackId in_syscall = p.stacks.intern_path(std::vector{main_f, ip, syscall, read});
  const model::StackId leaf = p.stacks.intern_path(std::vector{main_f, ip});
  const model::StackId user_only_preempted = p.stacks.intern_path(std::vector{main_f, ip, preempted});
  for (model::StackId s : {faulted, in_syscall, leaf, user_only_preempted}) t.samples.push_back({1, s, 0});
  t.markers.push_back({.name = p.strings.intern("Blocked"), .stack = faulted});
  t.markers.push_back({.name = p.strings.intern("Preempted"), .stack = leaf});

  CHECK(mark_interrupted_frames(p, "[preempted]") == 2);
  CHECK(user_address_under(p, t.samples[0].stack) == 0x6001);  // nudged back to 0x6000 by every reader
  CHECK(p.frames.get(p.stacks.frame(t.samples[0].stack)).name == p.strings.intern("handle_mm_fault"));
  CHECK(user_address_under(p, t.samples[1].stack) == 0x6000);  // after `syscall`: a return address
  CHECK(t.samples[2].stack == leaf);                           // a sampled leaf is exact already
  CHECK(user_address_under(p, p.stacks.prefix(t.samples[3].stack)) == 0x6001);
  CHECK(user_address_under(p, t.markers[0].stack) == 0x6001);
  CHECK(user_address_under(p, t.markers[1].stack) == 0x6001);  // a preemption's backtrace without kernel
  // The callers above keep their return addresses.
  CHECK(p.frames.get(p.stacks.frame(p.stacks.prefix(p.stacks.prefix(p.stacks.prefix(t.samples[0].stack)))))
            .address == 0x5000);
}

TEST_CASE("execve: the old program's frames become (execve); the new entry point stays exact",
          "[recorder][interrupted]") {
  model::Profile p;
  p.processes.emplace_back();
  model::Thread& t = p.processes[0].threads.emplace_back();
  const model::FrameId truncated = p.label_frame("(stack truncated)"),
                       old_ip = p.native_frame(0x7f0000012ad7);
  const model::FrameId entry = p.native_frame(0x7f5000001ab71);  // the builder's entry point, at + 1
  const model::FrameId syscall = kernel(p, "entry_SYSCALL_64_after_hwframe"),
                       sys = kernel(p, "do_syscall_64");
  const model::FrameId exec = kernel(p, "__x64_sys_execve"), load = kernel(p, "load_elf_binary");
  const model::FrameId copy = kernel(p, "_copy_to_user"),
                       timer = kernel(p, "asm_sysvec_apic_timer_interrupt");
  const model::StackId before =
      p.stacks.intern_path(std::vector{truncated, old_ip, syscall, sys, exec, load, copy});
  const model::StackId at_entry = p.stacks.intern_path(std::vector{entry, syscall, sys, exec});
  const model::StackId timer_at_entry = p.stacks.intern_path(std::vector{entry, timer});
  for (model::StackId s : {before, at_entry, timer_at_entry}) t.samples.push_back({1, s, 0});
  const std::unordered_set<model::FrameId> entries{entry};

  CHECK(mark_interrupted_frames(p, "[preempted]", entries) == 0);  // exact already: no second + 1
  CHECK(mark_exec_frames(p, entries) == 1);
  std::vector<model::FrameId> path;
  for (model::StackId s = t.samples[0].stack; s != model::kNoStack; s = p.stacks.prefix(s))
    path.push_back(p.stacks.frame(s));
  CHECK(path == std::vector{copy, load, exec, sys, syscall, p.label_frame(kExecLabel)});
  CHECK(t.samples[1].stack == at_entry);
  CHECK(t.samples[2].stack == timer_at_entry);
}
