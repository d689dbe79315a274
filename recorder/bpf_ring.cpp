#include "recorder/bpf_ring.h"

#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace fxprof::recorder {

namespace {

// kernel/bpf/ringbuf.c's record header: the length's top bits, and the header's size.
constexpr uint32_t kBusyBit = 1u << 31;
constexpr uint32_t kDiscardBit = 1u << 30;
constexpr size_t kHeaderBytes = 8;

}  // namespace

size_t consume_ring(const RingView& ring, std::vector<std::byte>& scratch,
                    const std::function<void(std::span<const std::byte>)>& f) {
  const size_t size = ring.data.size();
  if (size == 0) return 0;
  const uint64_t mask = size - 1;
  uint64_t cons = __atomic_load_n(ring.consumer, __ATOMIC_ACQUIRE);
  size_t given = 0;
  for (;;) {
    const uint64_t prod = __atomic_load_n(ring.producer, __ATOMIC_ACQUIRE);
    if (cons >= prod) break;
    while (cons < prod) {
      // Records are 8-byte aligned and the data a power of two: a header never wraps.
      const auto* header = reinterpret_cast<const uint32_t*>(ring.data.data() + (cons & mask));
      const uint32_t word = __atomic_load_n(header, __ATOMIC_ACQUIRE);
      if (word & kBusyBit) return given;  // still being written: the next consume() reads it
      const size_t len = word & ~(kBusyBit | kDiscardBit);
      if (len > size - kHeaderBytes) return given;  // cannot be: the kernel caps a record below the ring
      if ((word & kDiscardBit) == 0) {
        const size_t at = (cons + kHeaderBytes) & mask;
        if (at + len <= size) {
          f(ring.data.subspan(at, len));
        } else {  // wraps around the end: copied whole
          const size_t first = size - at;
          scratch.resize(len);
          std::memcpy(scratch.data(), ring.data.data() + at, first);
          std::memcpy(scratch.data() + first, ring.data.data(), len - first);
          f(scratch);
        }
        ++given;
      }
      cons += (len + kHeaderBytes + 7) / 8 * 8;
      __atomic_store_n(ring.consumer, cons, __ATOMIC_RELEASE);
    }
  }
  return given;
}

Result<BpfRing> BpfRing::open(int map_fd, size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (size == 0 || (size & (size - 1)) != 0 || size % page != 0)
    return Err("the BPF ring buffer's size " + std::to_string(size) +
               " is not a power-of-two number of pages");
  BpfRing r;
  void* c = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (c == MAP_FAILED) return Err("cannot map the BPF ring buffer's consumer page: " + errno_text(errno));
  r.consumer_ = Mapping(c, page);
  // The producer's page and the data after it, once (libbpf maps the data twice: see bpf_ring.h).
  void* d = mmap(nullptr, page + size, PROT_READ, MAP_SHARED, map_fd, static_cast<off_t>(page));
  if (d == MAP_FAILED) return Err("cannot map the BPF ring buffer: " + errno_text(errno));
  r.data_ = Mapping(d, page + size);
  r.view_.consumer = static_cast<uint64_t*>(c);
  r.view_.producer = static_cast<const uint64_t*>(d);
  r.view_.data = std::span<const std::byte>(static_cast<const std::byte*>(d) + page, size);
  // Polled through epoll, as libbpf does: the map's own poll says readable whenever a record waits, the
  // epoll descriptor only after the program woke it (so the reader is not woken by every wake record).
  r.epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!r.epoll_.valid()) return Err("epoll_create1: " + errno_text(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(r.epoll_.get(), EPOLL_CTL_ADD, map_fd, &ev) != 0)
    return Err("cannot poll the BPF ring buffer: " + errno_text(errno));
  return r;
}

Result<BpfRing> BpfRing::open(bpf_object* object, const char* name) {
  bpf_map* map = bpf_object__find_map_by_name(object, name);
  if (!map || bpf_map__fd(map) < 0) return Err(std::string("the BPF program has no ring buffer ") + name);
  return open(bpf_map__fd(map), bpf_map__max_entries(map));
}

size_t BpfRing::consume(const std::function<void(std::span<const std::byte>)>& f) {
  if (view_.data.empty()) return 0;
  const uint64_t waiting = __atomic_load_n(view_.producer, __ATOMIC_ACQUIRE) - *view_.consumer;
  high_water_ = std::max<size_t>(high_water_, waiting);
  return consume_ring(view_, scratch_, f);
}

bool BpfRing::wait(int timeout_ms) const {
  epoll_event ev{};
  return epoll_wait(epoll_.get(), &ev, 1, timeout_ms) > 0;
}

}  // namespace fxprof::recorder
