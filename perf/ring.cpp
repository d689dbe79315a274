#include "perf/ring.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fxprof::perf {

UniqueFd perf_event_open(const perf_event_attr& attr, int pid, int cpu, int group_fd, int& err) {
  long fd = syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return UniqueFd();
  }
  err = 0;
  return UniqueFd(static_cast<int>(fd));
}

Result<RingBuffer> RingBuffer::map(int fd, size_t data_pages, size_t min_pages) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  int last_err = 0;
  for (size_t pages = data_pages; pages >= min_pages && pages > 0; pages /= 2) {
    size_t len = (pages + 1) * page;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      RingBuffer rb;
      rb.fd_ = fd;
      rb.map_ = Mapping(p, len);
      rb.data_ = static_cast<const std::byte*>(p) + page;
      rb.size_ = pages * page;
      return rb;
    }
    last_err = errno;
    if (last_err != EPERM && last_err != ENOMEM) break;
  }
  return Err(
      "cannot map a perf ring buffer (" + errno_text(last_err) +
      "): the locked-memory budget kernel.perf_event_mlock_kb (and ulimit -l) is exhausted; raise it with "
      "`sudo sysctl kernel.perf_event_mlock_kb=2048`");
}

uint64_t RingBuffer::load_head() const {
  auto* meta = static_cast<perf_event_mmap_page*>(map_.data());
  return __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
}

void RingBuffer::release(uint64_t pos) {
  auto* meta = static_cast<perf_event_mmap_page*>(map_.data());
  __atomic_store_n(&meta->data_tail, pos, __ATOMIC_RELEASE);
  tail_ = pos;
}

const perf_event_header* RingBuffer::record_at(uint64_t pos, std::vector<std::byte>& scratch) const {
  size_t off = pos & (size_ - 1);
  // Records are 8-byte aligned and the buffer size is a power of two, so a header never straddles the end.
  auto* h = reinterpret_cast<const perf_event_header*>(data_ + off);
  if (off + h->size <= size_) return h;
  scratch.resize(h->size);
  size_t first = size_ - off;
  std::memcpy(scratch.data(), data_ + off, first);
  std::memcpy(scratch.data() + first, data_, h->size - first);
  return reinterpret_cast<const perf_event_header*>(scratch.data());
}

}  // namespace fxprof::perf
