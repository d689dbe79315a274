// fxprof recorder internals: names the kernel frames of a finished recording from /proc/kallsyms.
//
// /proc/kallsyms is ~120k lines and costs ~30 ms of kernel time to generate on this VM, so it is read once,
// at the end, and only when the recording holds kernel frames; only text symbols are kept.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/host.h"

namespace fxprof::recorder {

// Sets Frame::name of every Kernel frame of `profile` whose address falls in a known kernel function, as
// `procfs` names them (live_procfs(): /proc/kallsyms). Returns the number of frames named (0 when kallsyms
// hides addresses: kernel.kptr_restrict).
size_t name_kernel_frames(model::Profile& profile, Procfs& procfs);

// /proc/kallsyms itself (live_procfs().kernel_symbols): the text symbol at or below each of `addrs` (sorted,
// unique), "" where none; empty when addresses are hidden.
std::vector<std::string> read_kallsyms(std::span<const uint64_t> addrs);

}  // namespace fxprof::recorder
