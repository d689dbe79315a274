// fxprof perf layer: opening perf events and reading their mmap'ed ring buffers, for every live source
// (`record`'s rings in recorder/, `stat`'s in counters/, the unwinder's test captures).
//
// A ring is 1 metadata page and 2^n data pages. The kernel publishes data_head (read with acquire), we hand
// space back with data_tail (a release store). Records are 8-byte aligned and the data size a power of two,
// so a header never straddles the end; a record that wraps is copied whole into scratch space.
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace fxprof::perf {

// perf_event_open(2) with PERF_FLAG_FD_CLOEXEC; on failure returns an invalid fd and sets `err` to errno.
UniqueFd perf_event_open(const perf_event_attr& attr, int pid, int cpu, int group_fd, int& err);

// One mmap'ed perf ring buffer.
class RingBuffer {
 public:
  // Maps `data_pages` (a power of two) data pages of `fd`'s buffer; on EPERM/ENOMEM halves the size down to
  // `min_pages` (the mlock budget of unprivileged users) before giving up.
  static Result<RingBuffer> map(int fd, size_t data_pages, size_t min_pages);

  int fd() const { return fd_; }
  size_t data_size() const { return size_; }

  // Snapshot of the readable range [tail, head) (acquire load of data_head).
  uint64_t load_head() const;
  uint64_t tail() const { return tail_; }
  // Releases everything up to `pos` to the kernel (release store of data_tail).
  void release(uint64_t pos);
  // Pointer to the record at `pos`; copies a record that wraps around the end into `scratch`.
  const perf_event_header* record_at(uint64_t pos, std::vector<std::byte>& scratch) const;

  // Hands every record published so far to `f` (each contiguous until `f` returns), then releases them.
  template <class F>
  void drain(std::vector<std::byte>& scratch, F&& f) {
    const uint64_t head = load_head();
    uint64_t pos = tail_;
    while (pos < head) {
      const perf_event_header* h = record_at(pos, scratch);
      if (h->size < sizeof(perf_event_header)) break;  // cannot happen; do not spin on it
      f(h);
      pos += h->size;
    }
    release(head);
  }

 private:
  int fd_ = -1;
  Mapping map_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace fxprof::perf
