// fxprof unwinder: turns a sample's user registers and a copy of the top of its user stack into the list of
// return addresses, using the binaries' call-frame information (.eh_frame_hdr/.eh_frame, .debug_frame), with
// a frame-pointer fallback for code without unwind information.
//
// Used by the recorder's reading thread for every sample in DWARF mode, so unwinding is allocation-free on
// the hot path and parsed unwind tables are cached per binary and shared by every process mapping it.
//
// Design (numbers measured on this 2-vCPU VM with bench/unwind.sh and the tests in tests/recorder/unwind/):
// - Budget. A sample costs the sampled thread ~20 us here (timer interrupt + stack copy); the reading thread
//   must unwind it for much less, on one core, for every busy CPU. Measured on real 32 KiB stack copies:
//   1.6-2.5 M stacks/s warm for python3 (libpython -O2 without frame pointers, 18 frames a stack: 0.4-0.6 us
//   a stack, 30-46 M frames/s), 3.3-3.6 M stacks/s for an -O2 test program (11.5 frames); the first pass,
//   which opens and indexes the binaries and evaluates every rule, still runs at 0.17-0.85 M stacks/s. The
//   target was 200k/s: unwinding is never the reason a recording loses samples.
// - Modules. Each executable file mapping resolves to one Module per binary (key: path + device + inode +
//   mtime, so a rebuilt file is a new module), shared by every process mapping it, kept until no process
//   maps it and the recording evicts it (evict_unmapped, at a continuous recording's cut). A module is the
//   mmap'ed file itself: .eh_frame_hdr's sorted table is binary-searched in place (no parse, no copy); only a
//   binary without a usable table, and .debug_frame (from the binary or its separate debug file, found by
//   elf/'s locator with build ID and debuglink CRC checked, loaded lazily on the first address .eh_frame
//   lacks), get a sorted FDE index, built once. "[vdso]" is read from our own process
//   (getauxval(AT_SYSINFO_EHDR): same kernel, same image).
// - Rules. Evaluating DW_CFA_* instructions for one address walks the CIE and FDE programs (a few us); a
//   program hits a few thousand distinct addresses over and over, so the result is reduced to a 24-byte rule
//   (CFA = register + off; RA at CFA+off; each callee-saved register unchanged, at or = CFA+off, or another
//   register's; or: outermost frame / signal trampoline / use frame pointers) and cached per (module,
//   address) in a fixed 8192-slot, 2-way cache allocated once (a set is one 64-byte cache line)
//   (framehop does the same with 509 slots). python3: 99.93 % hits (direct-mapped: 99.6 %, ~7 % of its rules
//   re-evaluated on every pass). DWARF expressions are folded at rule time with RIP = the address, which
//   covers the PLT's CFA expression; any other expression makes the rule "use frame pointers".
// - Hot path. unwind() does a hash lookup of the pid, a binary search of its mappings per frame and a cache
//   probe: no allocation, no system call, no lock. Only a cache miss parses CFI (and, once per binary, may
//   load .debug_frame).
// - Frames. out[0] is the sample IP, later entries are return addresses, looked up at ra-1 so the lookup
// lands
//   in the call. A signal frame (glibc's __restore_rt, `mov $15,%rax; syscall`, or a CIE with the 'S'
//   augmentation) restores RIP/RSP/RBP from the ucontext in the stack copy, and the interrupted IP is then
//   looked up exactly. A callee-saved slot below SP (epilogues after `pop %rbp`, where GCC's CFI still says
//   "saved") means the register was already restored. Reading past the copy ends the stack as Truncated
//   (the recorder then splices the kernel's FP callchain or adds a marker frame).
// - Code without CFI (JIT code and trampolines in anonymous memory, binaries without .eh_frame) is walked by
//   the frame-pointer rule, validated: BP aligned, above SP and within 8 MiB of it, the return address
//   inside known code (an executable mapping of the process, file or anonymous). When that fails in
//   anonymous code, whose runtime could not have written CFI for us, the copy is scanned upward (up to
//   4 KiB) for the first word pointing into known code (for code in a file: right after a call
//   instruction). Both are heuristics: counted per stack (UnwindStats fp_stacks/scanned_stacks, written to
//   the profile's meta, "Stack walking"), and UnwindResult::heuristic says so per stack. A binary without
//   CFI is not scanned: its walk fails and the post-recording line names it with the remedy.
// - Checked against `perf record --call-graph dwarf` on the same samples: the same functions on 100 % of the
//   samples both unwind completely (tests/recorder/unwind/unwind_test.cpp).
// - Registers. x86-64 samples IP, SP and the callee-saved BX, BP, R12-R15 (64 bytes a sample, next to the
//   32 KiB stack copy): with IP/SP/BP only, every sample taken during lazy symbol binding ended in
//   _dl_runtime_resolve_xsavec, whose CFA is RBX-based, and any frame whose CFA lives in a register a callee
//   saved was lost. Every register rule is evaluated (rules.h). UserRegs/decode_user_regs/user_regs_mask
//   (regs.cpp) are the only architecture-facing interface, so aarch64 (PC, SP, FP, LR) can follow.
// - Files: binaries.* (the recording's opened binaries, shared with the profile builder), cfi.* (CIE/FDE
//   parsing), rules.* (CFA programs -> rules), module.* (binaries' CFI), regs.cpp,
//   unwinder.cpp (the walk: processes, rule cache), splice.* (the kernel's frame-pointer chain after a stop).
// - Threads. One Unwinder is used by one thread (the recorder's reading thread); `pid` is the process id
//   (tgid): threads share their process's mappings. Paths are opened as seen from our mount namespace.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "elf/elf.h"
#include "perf/records.h"
#include "recorder/unwind/binaries.h"

namespace fxprof::recorder {

// The user registers captured with a sample (the perf layer's: perf/records.h).
using perf::UserRegs;
// PERF_SAMPLE_REGS_USER mask asking for exactly these registers (perf writes them in bit order).
uint64_t user_regs_mask();
// Decodes the registers perf wrote (values in bit order of user_regs_mask(); missing ones read as 0).
UserRegs decode_user_regs(std::span<const uint64_t> values);

enum class UnwindEnd : uint8_t {
  Complete,   // reached the outermost frame (no return address / CFI says undefined RA)
  Truncated,  // the stack copy ended before the outermost frame
  Failed,     // no rule found and frame pointers led nowhere
};

struct UnwindResult {
  size_t count = 0;  // addresses written to `out`: out[0] = ip, then return addresses (not adjusted)
  UnwindEnd end = UnwindEnd::Complete;
  bool heuristic = false;  // some frame was recovered without CFI (frame pointers or a stack scan)
};

// Counters since construction (cheap to read at any time, e.g. for --verbose).
struct UnwindStats {
  uint64_t stacks = 0;
  uint64_t complete = 0;
  uint64_t truncated = 0;
  uint64_t failed = 0;
  uint64_t frames = 0;
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;       // rules evaluated from CFI
  uint64_t debug_frame_rules = 0;  // of those, found in .debug_frame (binary or separate debug file)
  uint64_t fp_frames = 0;          // frames found by the frame-pointer fallback
  uint64_t scanned_frames = 0;     // frames found by the return-address scan (code outside any file)
  uint64_t fp_stacks = 0;          // stacks that used the frame-pointer fallback
  uint64_t scanned_stacks = 0;     // stacks that used the return-address scan
  uint64_t signal_frames = 0;      // sigreturn trampolines crossed
  uint64_t modules = 0;            // distinct binaries loaded
  uint64_t modules_failed = 0;     // binaries that could not be opened or parsed (unwound by frame pointers)
};

// Where incomplete stacks stopped: per binary, the stacks whose walk ended in it.
struct UnwindStop {
  std::string path;  // "" for code outside any file mapping (JIT, anonymous executable memory)
  uint64_t truncated = 0;
  uint64_t failed = 0;
  uint64_t corrupt = 0;  // of the failed: its .eh_frame search table led to bytes that are not an FDE
};

// The path the recorder gives executable memory without a file (MMAP2 names it "//anon"; /proc/PID/maps
// shows no name): JIT code, trampolines. Known code for the walk, with no CFI.
inline constexpr std::string_view kAnonymousCode = "//anon";
bool is_anonymous_code(std::string_view path);

// One executable mapping of /proc/PID/maps.
struct MapsEntry {
  uint64_t start = 0, end = 0, offset = 0;
  uint32_t prot = 0;  // PROT_* bits
  uint64_t dev = 0, ino = 0;
  std::string path;  // kAnonymousCode for memory without a file; " (deleted)" dropped
};
// The executable mappings of a /proc/PID/maps text: the one parser of it (the builder's attach, and
// Unwinder::load_proc_maps).
std::vector<MapsEntry> executable_mappings(std::string_view maps);

class Unwinder {
 public:
  // `locator` finds separate debug files for .debug_frame (build-ID trees, debuglink, --symbol-dir; never
  // debuginfod: no network fetch on the reading thread).
  explicit Unwinder(elf::LocatorOptions locator = {});
  ~Unwinder();
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  // Process bookkeeping, fed from MMAP2/FORK/COMM(exec)/EXIT records (and /proc/PID/maps when attaching).
  // Only executable mappings matter; `path` may be "[vdso]" or anonymous (kAnonymousCode).
  // `prot` (PROT_* bits of the MMAP2 record) picks the ELF segment the kernel mapped there.
  // `open_path`, when given, is where the file is read from (a binary deleted while it runs: the recorder's
  // descriptor, /proc/self/fd/N); `path` still names it. `binary`, when given, is the table's binary read
  // from there (binaries(): the caller looked it up already).
  void on_mmap(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, std::string_view path,
               uint32_t prot = PROT_READ | PROT_EXEC, std::string_view open_path = {},
               const Binary* binary = nullptr);
  void on_fork(uint32_t parent_pid, uint32_t child_pid);  // the child starts with the parent's mappings
  void on_exec(uint32_t pid);                             // forgets the old image's mappings
  void on_exit(uint32_t pid);

  // Attach mode: feeds every executable mapping of /proc/PID/maps to on_mmap.
  Status load_proc_maps(uint32_t pid);

  // Unwinds one sample. `stack` is the copy of user memory starting at regs.sp.
  UnwindResult unwind(uint32_t pid, const UserRegs& regs, std::span<const std::byte> stack,
                      std::span<uint64_t> out);

  // A frame a tail call took off the stack: when the instruction before return address `ra` is a direct
  // call (E8 rel32) to a function's entry (an FDE starts there; not a PLT stub) whose code does not contain
  // `callee` (the next frame inward: the exact IP, or its return address - 1), the called function ended in
  // a `jmp` to another and its frame is gone; returns the called function's address. GCC -O2 ends
  // `lock(); ...; pthread_mutex_unlock(&m);` that way, so a waker's stack at the unlock lacks the function
  // that held the lock. Reads the binary's code; not for the hot path (the Wakeup stacks use it).
  std::optional<uint64_t> tail_called(uint32_t pid, uint64_t ra, uint64_t callee);

  const UnwindStats& stats() const;
  // The recording's table of opened binaries (binaries.h): the profile builder reads its libs' identities
  // there, so each binary is opened and parsed once.
  Binaries& binaries();
  // The binaries where stacks stopped short (Truncated or Failed), most stacks first. Not for the hot path.
  std::vector<UnwindStop> stops() const;
  // Forgets the modules no process maps now (their cached rules too: a module id is used again), then
  // evicts from the table of binaries (Binaries::evict) those no module left reads and `keep` does not
  // hold. A binary mapped again later is loaded again. Returns how many binaries went.
  size_t evict_unmapped(const std::function<bool(const Binary&)>& keep);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fxprof::recorder
