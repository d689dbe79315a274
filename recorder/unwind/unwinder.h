// fxprof unwinder: turns a sample's user registers and a copy of the top of its user stack into the list of
// return addresses, using the binaries' call-frame information (.eh_frame_hdr/.eh_frame, .debug_frame), with a
// frame-pointer fallback for code without unwind information.
//
// Used by the recorder's reading thread for every sample in DWARF mode, so unwinding is allocation-free on the
// hot path and parsed unwind tables are cached per binary and shared by every process mapping it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace fxprof::recorder {

// The user registers captured with a sample (x86-64: the three the unwinder needs; aarch64 would add LR).
struct UserRegs {
  uint64_t ip = 0;
  uint64_t sp = 0;
  uint64_t bp = 0;
};
// PERF_SAMPLE_REGS_USER mask asking for exactly these registers, in the order perf writes them (bit order).
uint64_t user_regs_mask();
// Decodes the registers perf wrote (values in bit order of user_regs_mask()).
UserRegs decode_user_regs(std::span<const uint64_t> values);

enum class UnwindEnd : uint8_t {
  Complete,     // reached the outermost frame (no return address / CFI says undefined RA)
  Truncated,    // the stack copy ended before the outermost frame
  Failed,       // no rule found and frame pointers led nowhere
};

struct UnwindResult {
  size_t count = 0;  // addresses written to `out`: out[0] = ip, then return addresses (not adjusted)
  UnwindEnd end = UnwindEnd::Complete;
};

class Unwinder {
 public:
  Unwinder();
  ~Unwinder();
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  // Process bookkeeping, fed from MMAP2/FORK/COMM(exec)/EXIT records (and /proc/PID/maps when attaching).
  // Only executable file mappings matter; `path` may be "[vdso]".
  void on_mmap(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, std::string_view path);
  void on_fork(uint32_t parent_pid, uint32_t child_pid);  // the child starts with the parent's mappings
  void on_exec(uint32_t pid);                              // forgets the old image's mappings
  void on_exit(uint32_t pid);

  // Unwinds one sample. `stack` is the copy of user memory starting at regs.sp.
  UnwindResult unwind(uint32_t pid, const UserRegs& regs, std::span<const std::byte> stack,
                      std::span<uint64_t> out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fxprof::recorder
