// fxprof recorder internals: which user frames are interrupted instructions rather than return addresses.
//
// Under the kernel part of a stack, the first user frame is the user instruction pointer saved when the
// kernel was entered. After a system call it is the instruction after `syscall`, which behaves like a return
// address (the Firefox Profiler's nudgeReturnAddresses and model/symbols.h look every caller up one byte
// early, at the `syscall` itself). After an interrupt or exception (the timer, a preemption, a page fault)
// it is the exact instruction that was interrupted or faulted: looked up one byte early it names the
// previous instruction, or, at a function's first instruction, the function that ends before it.
//
// The kernel's entry frame (the outermost kernel frame) tells the two apart, so after the kernel frames are
// named such a user frame is replaced by one at address + 1: every reader that treats it as a caller (the
// front end, our own lookups, a baked profile, the exports) then lands on the exact instruction. An off-CPU
// `[preempted]` sample without kernel frames (kernel frames not recorded) is taken as interrupted too.
#pragma once

#include <cstddef>
#include <string_view>
#include <unordered_set>

#include "model/profile.h"

namespace fxprof::recorder {

// Whether `kernel_function` (a kallsyms name) is where the kernel is entered by an interrupt or exception
// (x86-64: asm_exc_*, asm_sysvec_*, asm_common_interrupt, and the pre-5.8 names), not a system call.
bool is_interrupt_entry(std::string_view kernel_function);

// Rewrites the stacks of samples and markers whose user part ends in an interrupted instruction (see the
// header comment); `preempted_label` is the off-CPU leaf for preemption ("[preempted]"). Returns the number
// of distinct stacks changed. Call once, after the kernel frames are named. Frames in `exact` are exact
// already (the builder's entry points after execve) and are left alone.
size_t mark_interrupted_frames(model::Profile& profile, std::string_view preempted_label,
                               const std::unordered_set<model::FrameId>& exact = {});

// The label over the kernel frames of a sample taken in execve after the program was replaced but before
// it runs: the saved user registers still point into the old program (fxprof's launcher, or the shell that
// exec'd), whose mappings are gone, so its frames would be raw addresses.
inline constexpr std::string_view kExecLabel = "(execve)";
// The builder's root over samples in code whose mapping records were lost.
inline constexpr std::string_view kRecordsLostLabel = "(unknown code: records lost)";
// Whether `kernel_function` (a kallsyms name) is part of execve.
bool is_exec_function(std::string_view kernel_function);
// Replaces the user part of stacks in execve by kExecLabel, unless it is one of `entries` (the new program's
// entry point: its first instruction, stored exact by the builder). Returns the stacks changed. Call after
// the kernel frames are named.
size_t mark_exec_frames(model::Profile& profile, const std::unordered_set<model::FrameId>& entries);

}  // namespace fxprof::recorder
