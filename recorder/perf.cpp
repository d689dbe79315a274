#include "recorder/perf.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "recorder/builder.h"

namespace fxprof::recorder {

uint64_t EventConfig::sample_type() const {
  uint64_t t = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN;
  // With a fixed period (-e) the period is known, and asking for it makes the kernel sample a software
  // event (faults, switches, tracepoints) at every occurrence whatever the period (perf_swevent_event).
  if (!event_period) t |= PERF_SAMPLE_PERIOD;
  if (dwarf) t |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  return t;
}

perf_event_attr make_attr(const EventConfig& c) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  if (c.event_period) {
    a.type = c.event_type;
    a.config = c.event_config;
  } else if (c.hardware) {
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_CPU_CYCLES;
  } else {
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
  }
  if (c.event_period) {
    a.sample_period = c.event_period;  // one sample per period events: each sample weighs the same
  } else {
    a.sample_freq = c.frequency;
    a.freq = 1;
  }
  a.sample_type = c.sample_type();
  if (c.dwarf) {
    a.sample_regs_user = c.regs_mask;
    a.sample_stack_user = c.stack_size;
  }
  a.disabled = c.enable_on_exec ? 1 : 0;
  a.enable_on_exec = c.enable_on_exec ? 1 : 0;
  a.inherit = c.cpu_wide ? 0 : 1;
  a.mmap = 1;
  a.mmap2 = 1;
  a.mmap_data = 1;  // data mappings too: a program announces its marker files by mapping them (markers.h)
  a.comm = 1;
  a.comm_exec = 1;
  a.task = 1;
  a.context_switch = 1;
  a.sample_id_all = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.exclude_kernel = c.exclude_kernel ? 1 : 0;
  a.exclude_hv = c.exclude_kernel ? 1 : 0;
  if (c.wakeup_bytes) {
    a.watermark = 1;
    a.wakeup_watermark = c.wakeup_bytes;
  }
  return a;
}

perf_event_attr make_switch_attr(const EventConfig& c) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
  a.sample_period = 1;
  // Registers in frame-pointer mode too (RDI alone there): the lock address of a futex wait.
  a.sample_type = c.sample_type() | PERF_SAMPLE_REGS_USER;
  a.sample_regs_user = c.switch_regs_mask;
  if (c.dwarf) a.sample_stack_user = c.switch_stack_size;
  if (c.switch_wakeup_bytes) {
    a.watermark = 1;
    a.wakeup_watermark = c.switch_wakeup_bytes;
  }
  a.disabled = c.enable_on_exec ? 1 : 0;
  a.enable_on_exec = c.enable_on_exec ? 1 : 0;
  a.inherit = c.cpu_wide ? 0 : 1;
  a.sample_id_all = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  return a;
}

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

void RingSet::add(RingBuffer rb, bool switch_event) {
  bufs_.push_back(std::move(rb));
  switch_.push_back(switch_event);
  scratch_.emplace_back().reserve(1 << 16);
  heads_.push_back(bufs_.back().tail());
}

void RingSet::collect(std::vector<RecordRef>& out) {
  for (size_t b = 0; b < bufs_.size(); ++b) {
    RingBuffer& rb = bufs_[b];
    const uint64_t head = rb.load_head();
    uint64_t pos = rb.tail();
    while (pos < head) {
      const perf_event_header* h = rb.record_at(pos, scratch_[b]);
      if (h->size < sizeof(perf_event_header)) {  // cannot happen; do not spin on it
        pos = head;
        break;
      }
      out.push_back({record_time(h), h, switch_[b]});
      pos += h->size;
    }
    heads_[b] = pos;
  }
}

void RingSet::release() {
  for (size_t b = 0; b < bufs_.size(); ++b) bufs_[b].release(heads_[b]);
}

}  // namespace fxprof::recorder
