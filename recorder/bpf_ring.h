// fxprof recorder internals: the reader of an eBPF ring buffer (BPF_MAP_TYPE_RINGBUF), for the waker tracer
// (waker.h) and the heap uprobes (heap_uprobes.h).
//
// libbpf's ring_buffer maps the data area twice in a row, so that a record wrapping around its end reads as
// one piece; the kernel maps every page at mmap time, so RSS counts the ring twice (the waker's 16 MiB ring
// was 32 MiB of record's peak RSS, more than the program's symbols loaded meanwhile: issue 25 item 6). This
// reader maps it once and copies the rare record that wraps. Same protocol as the kernel's
// (kernel/bpf/ringbuf.c): a consumer position page the reader writes, a producer position page, then the
// data, each record an 8-byte header (length with busy and discard bits) then its bytes, 8-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

struct bpf_object;

namespace fxprof::recorder {

// The ring's shared state as mapped: positions grow without bound; `data` is a power of two in size.
struct RingView {
  uint64_t* consumer = nullptr;        // written by the reader (release), read by the kernel
  const uint64_t* producer = nullptr;  // written by the kernel
  std::span<const std::byte> data;
};

// Calls `f` with each committed record from the consumer position to the producer's, in order, skipping
// discarded ones, and moves the consumer position past each; stops at a record still being written (busy).
// A record that wraps around the data's end is given from `scratch`. Returns the records given.
size_t consume_ring(const RingView& ring, std::vector<std::byte>& scratch,
                    const std::function<void(std::span<const std::byte>)>& f);

class BpfRing {
 public:
  // Maps the ring buffer map `map_fd` of `size` bytes (its max_entries) once, and an epoll descriptor that is
  // readable when the program asked for the reader to be woken (BPF_RB_FORCE_WAKEUP, or by default at each
  // record), as libbpf's ring_buffer__epoll_fd is. The error says which step failed.
  static Result<BpfRing> open(int map_fd, size_t size);
  // The ring buffer map named `name` of a loaded object, its size its max_entries.
  static Result<BpfRing> open(bpf_object* object, const char* name);
  BpfRing() = default;

  // Hands each record waiting to `f` (non-blocking); returns how many.
  size_t consume(const std::function<void(std::span<const std::byte>)>& f);
  // The most bytes found waiting at a consume(): how full the ring came to be (the records wait only
  // between two calls), against size().
  size_t high_water() const { return high_water_; }
  size_t size() const { return view_.data.size(); }
  // Waits up to `timeout_ms` for the ring to be readable; false on timeout or error.
  bool wait(int timeout_ms) const;
  int fd() const { return epoll_.get(); }
  // Bytes of the ring mapped (the data once, and its two position pages): what it adds to RSS.
  size_t mapped_bytes() const { return consumer_.size() + data_.size(); }

 private:
  Mapping consumer_;  // the consumer position's page (read-write)
  Mapping data_;      // the producer position's page, then the data, mapped once (read-only)
  RingView view_;
  UniqueFd epoll_;
  std::vector<std::byte> scratch_;  // a wrapping record, copied whole
  size_t high_water_ = 0;
};

}  // namespace fxprof::recorder
