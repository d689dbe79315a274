// fxprof recorder internals: who woke a waiting thread (optional; off-CPU markers say "Woken by").
//
// An eBPF program on the sched_waking tracepoint (tp_btf, CO-RE: recorder/bpf/waker.bpf.c, compiled with
// clang at build time and embedded) sends {time, waker, wakee} for every wakeup of a traced process's thread
// by a traced process's thread into a BPF ring buffer, which the recording loop drains with the perf
// buffers. It needs root (CAP_BPF + CAP_PERFMON) and a kernel with BTF; where it cannot load, everything
// else works and one line says so. Only the waker's thread is kept: its user stack would need frame
// pointers (bpf_get_stack), which Debian's libc does not have.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/result.h"

struct bpf_object;
struct bpf_link;
struct ring_buffer;

namespace fxprof::recorder {

struct Waking {
  uint64_t time = 0;  // CLOCK_MONOTONIC ns
  uint32_t waker_pid = 0, waker_tid = 0, wakee_pid = 0, wakee_tid = 0;
};

class WakerTracer {
 public:
  // Loads and attaches the program; the error is the reason, for one line.
  static Result<std::unique_ptr<WakerTracer>> start();
  WakerTracer() = default;  // inert until start() has loaded it
  ~WakerTracer();
  WakerTracer(const WakerTracer&) = delete;
  WakerTracer& operator=(const WakerTracer&) = delete;

  void trace(uint32_t pid);  // wakeups in and by this process are reported from now on
  // Appends the wakeups waiting in the ring buffer to `out` (non-blocking).
  void drain(std::vector<Waking>& out);

 private:
  struct ObjectDeleter {
    void operator()(bpf_object* o) const;
  };
  struct LinkDeleter {
    void operator()(bpf_link* l) const;
  };
  struct RingDeleter {
    void operator()(ring_buffer* r) const;
  };
  std::unique_ptr<bpf_object, ObjectDeleter> object_;
  std::unique_ptr<bpf_link, LinkDeleter> link_;
  std::unique_ptr<ring_buffer, RingDeleter> ring_;
  int traced_fd_ = -1;
  std::vector<Waking>* sink_ = nullptr;  // where the ring buffer callback appends during drain()
};

}  // namespace fxprof::recorder
