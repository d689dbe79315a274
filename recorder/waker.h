// fxprof recorder internals: who woke a waiting thread (optional; off-CPU markers say "Woken by").
//
// An eBPF program on the sched_waking tracepoint (tp_btf, CO-RE: recorder/bpf/waker.bpf.c, compiled with
// clang at build time and embedded) sends {time, waker, wakee, flags} for every wakeup of a traced process's
// thread by anything (a traced thread, an interrupt, another process: Waking::flags) into a BPF ring buffer,
// which the recording loop drains with the perf buffers. The wake's time splits a wait: before it the thread
// was blocked, after it runnable and waiting for a CPU ([preempted]). It needs root (CAP_BPF + CAP_PERFMON)
// and a kernel with BTF; where it cannot load, everything else works and one line says so.
//
// A wake from a futex system call (futex, futex_wake: an unlock, a condition variable's signal, a join)
// also carries the futex word (for a lock, its address: the waiter's marker has the same), the waker's user
// registers saved at the system call (bpf_task_pt_regs) and a copy of its user stack from SP (16 KiB, less
// when the stack's top is nearer), which the builder unwinds with the CPU samples' DWARF unwinder: the
// holder's stack. bpf_get_stack would need frame pointers, which Debian's libc does not have. Other wakes
// (a pipe write, a thread's exit) stay ids only, a 104-byte record. The program's run is ~0.6 us without
// the copy, ~2.2-2.5 us with 8 KiB (kernel.bpf_stats_enabled; bench/offcpu.sh, futex scenario: the
// program's CPU time +1.4 us per futex wake). 8 KiB missed stdio's holders (buffered_vfprintf unlocks
// under an 8 KiB buffer of its own); 16 KiB costs ~1.5x the run of 8 KiB (the same futex scenario, this
// 2-core VM under a build: 8.4-10.6 us a run with 8 KiB, 11.1-18.0 us with 16 KiB); 32 KiB does not load
// (the per-CPU scratch record is capped at 32 KiB, the header is on top). Records that do not fit in the 16
// MiB ring buffer are counted (dropped()); the reader is woken when it is a quarter full (fd()). The ring is
// mapped once (bpf_ring.h): 16 MiB of RSS, not libbpf's 32.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "driver/driver.h"
#include "recorder/bpf_handles.h"
#include "recorder/bpf_ring.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

// Where a wake came from (Waking::flags, waker.bpf.c's WAKE_*): an interrupt wakes in whatever task it hit,
// which is then no waker; a task of a process we do not trace is one we cannot name.
inline constexpr uint32_t kWakeInterrupt = 1;  // an interrupt, softirq or NMI (a timer: a sleep's end; I/O)
inline constexpr uint32_t kWakeUntraced = 4;   // a task of a process not traced

// A wakeup, as the driver hands it to the builder (driver/driver.h).
using driver::Waking;

// One ring buffer record of waker.bpf.c (struct waking: 104 bytes of ids, futex word and registers, then
// `stack_len` bytes of stack) into `out`; false when it is shorter than it says.
bool decode_waking(std::span<const std::byte> record, Waking& out);
// The inverse, appended to `out` (a capture stores wakings this way: recorder/capture.h).
void encode_waking(const Waking& w, std::vector<std::byte>& out);
inline constexpr size_t kWakingHeaderBytes = 104;

class WakerTracer {
 public:
  // Loads and attaches the program; the error is the reason, for one line. `stacks`: futex wakes carry the
  // waker's registers and stack (DWARF mode). `pids` are traced from the attach on (before any round).
  static Result<std::unique_ptr<WakerTracer>> start(bool stacks, std::span<const uint32_t> pids = {});
  WakerTracer() = default;  // inert until start() has loaded it
  ~WakerTracer();
  WakerTracer(const WakerTracer&) = delete;
  WakerTracer& operator=(const WakerTracer&) = delete;

  void trace(uint32_t pid);  // wakeups in and by this process are reported from now on
  // Appends the wakeups waiting in the ring buffer to `out` (non-blocking).
  void drain(std::vector<Waking>& out);
  // Readable (poll) when the ring buffer is a quarter full; -1 before start().
  int fd() const;
  // Wakes the program could not write because the ring buffer was full (since start).
  uint64_t dropped() const;
  // How full the ring buffer came to be, and its size, in bytes (-v: the room left before wakes are lost).
  std::pair<size_t, size_t> ring_use() const {
    return ring_ ? std::pair{ring_->high_water(), ring_->size()} : std::pair<size_t, size_t>{0, 0};
  }
  // The program's runs and its total time in them (ns), as the kernel counts them: only while
  // kernel.bpf_stats_enabled is 1 (both 0 otherwise). For -v: what the tracer costs the threads it runs in.
  std::pair<uint64_t, uint64_t> run_stats() const;
  // When it attached (CLOCK_MONOTONIC ns): wakes before it were not seen.
  uint64_t attached_ns() const { return attached_ns_; }

 private:
  BpfObject object_;
  BpfLink link_;
  std::optional<BpfRing> ring_;
  int traced_fd_ = -1;
  int dropped_fd_ = -1;
  int prog_fd_ = -1;
  uint64_t attached_ns_ = 0;
};

// The tracer loaded on a thread of its own while the program runs. Loading parses the kernel's BTF and
// verifies the program: 30-50 ms of CPU idle, 627 ms of wall at load 8 on 2 cores, which the program used
// to wait for before its start (issue 36). The launched program now waits only for its perf events; the
// tracer traces `pids` from its attach on, and the Session tells it the processes seen meanwhile. Wakes
// before the attach are not seen (the Session says how long on a data-quality line; `record
// --wakers-from-start` loads it before the program starts instead).
//
// Test hook: when FXPROF_TEST_WAKER_GATE names a FIFO, the loading thread first reads one byte from it, so
// that a test can have the program run before the tracer attaches (tests/e2e/wakers_test.cpp).
class WakerLoader {
 public:
  WakerLoader(bool stacks, std::vector<uint32_t> pids);
  // Does not wait for a load still under way: its thread finishes alone and detaches what it loaded.
  ~WakerLoader();
  WakerLoader(const WakerLoader&) = delete;
  WakerLoader& operator=(const WakerLoader&) = delete;

  // Readable (poll) once the load ended, either way.
  int fd() const;
  // The tracer or the reason it did not load, once the load ended (then once only); nullopt before.
  std::optional<Result<std::unique_ptr<WakerTracer>>> take();
  uint64_t began_ns() const { return began_ns_; }  // when the load began (CLOCK_MONOTONIC)

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  uint64_t began_ns_ = 0;
};

}  // namespace fxprof::recorder
