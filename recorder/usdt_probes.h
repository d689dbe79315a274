// fxprof recorder: `record --usdt`: eBPF uprobes at USDT probes (elf/usdt.h) of the program fxprof launches
// and of the libraries it loads at its start (elf::linked_libraries), each hit with its time
// (CLOCK_MONOTONIC, the samples' clock), thread and arguments (recorder/usdt_markers.h turns them into
// markers).
//
// One BPF program (recorder/bpf/usdt.bpf.c) attached by libbpf's bpf_program__attach_usdt at every probe
// asked for (libbpf reads the notes' argument locations and raises the probes' semaphores while attached),
// into a BPF ring buffer that a thread of its own drains, as the heap uprobes do (recorder/heap_uprobes.h).
// Attached to the binaries' files before the program starts, so every process running them is traced: the
// caller keeps the pids it recorded. Needs root (CAP_BPF and CAP_PERFMON); start() says in one line why it
// cannot. A hit costs a trap into the kernel (bench/usdt.sh measures it).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "recorder/usdt_markers.h"

namespace fxprof::recorder {

class UsdtProbes {
 public:
  // Finds each request's probe in `program` (a path) or its libraries, with `pairs` also the end of each
  // begin (usdt_markers.h), then attaches. Err, in one line: a probe that is not there (and those that
  // are), or why the probes cannot be attached (not root).
  static Result<std::unique_ptr<UsdtProbes>> start(const std::string& program,
                                                   const std::vector<UsdtRequest>& requests, bool pairs);
  ~UsdtProbes();
  UsdtProbes(const UsdtProbes&) = delete;
  UsdtProbes& operator=(const UsdtProbes&) = delete;

  // Detaches, drains the ring buffer and hands over every hit recorded.
  UsdtHits finish();
  const std::vector<UsdtProbeUse>& probes() const { return probes_; }
  uint64_t dropped() const;  // hits the ring buffer had no room for

 private:
  struct Bpf;
  void consume();  // the ring buffer's records into hits_ (under bpf_->mu, or after the reader stopped)
  UsdtProbes();
  std::unique_ptr<Bpf> bpf_;
  std::vector<UsdtProbeUse> probes_;
  UsdtHits hits_;
  std::atomic<bool> stop_{false};
  std::thread reader_;
};

// The probes' uses for `requests` in `binaries` (the program first): each request in the first binary that
// has it, with `pairs` a begin's end added (an end asked for without its begin stays instants). Err names a
// probe none has, and lists those they have.
Result<std::vector<UsdtProbeUse>> plan_usdt_probes(const std::vector<std::string>& binaries,
                                                   const std::vector<UsdtRequest>& requests, bool pairs);

}  // namespace fxprof::recorder
