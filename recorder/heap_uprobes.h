// fxprof recorder: `record --heap` on a program whose allocator the heap shim cannot see (heap/heap.h,
// own_allocator: jemalloc, mimalloc, tcmalloc linked in, a Rust #[global_allocator]): uprobes on that
// allocator's functions in the executable, recorded into the same heap events (heap::ExternalCall) as the
// shim's.
//
// An eBPF program (recorder/bpf/heap_uprobes.bpf.c) on each allocation function's entry (the size) and
// return (the block, the user stack by frame pointers: its first frame, the caller, is right without them),
// and on each free function's entry (the block), into a BPF ring buffer that a thread of its own drains.
// Attached to the executable's file, so every process running it is traced; the caller keeps the pids it
// recorded. Needs root (CAP_BPF and CAP_PERFMON); start() says in one line why it cannot. Each call costs a
// trap into the kernel (a uprobe, ~1-3 us; a uretprobe more), whatever --heap's mode.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "heap/heap.h"

namespace fxprof::recorder {

class HeapUprobes {
 public:
  // Attaches to `functions` of the executable `path` (heap::allocator_role says which are allocations and
  // which frees; the rest are left out). Err: the reason, for one line.
  static Result<std::unique_ptr<HeapUprobes>> start(const std::string& path,
                                                    const std::vector<std::string>& functions);
  ~HeapUprobes();
  HeapUprobes(const HeapUprobes&) = delete;
  HeapUprobes& operator=(const HeapUprobes&) = delete;

  // Detaches, drains the ring buffer and hands over every call recorded, in time order.
  std::vector<heap::ExternalCall> finish();
  const std::vector<std::string>& attached() const { return attached_; }  // the functions probed
  uint64_t dropped() const;  // calls the ring buffer had no room for

 private:
  struct Bpf;
  void consume();  // the ring buffer's records into calls_ (under bpf_->mu, or after the reader stopped)
  HeapUprobes();
  std::unique_ptr<Bpf> bpf_;
  std::vector<std::string> attached_;
  std::vector<heap::ExternalCall> calls_;
  std::atomic<bool> stop_{false};
  std::thread reader_;
};

}  // namespace fxprof::recorder
