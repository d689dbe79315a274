#include "recorder/records.h"

#include <algorithm>

#include "base/byte_reader.h"

namespace fxprof::recorder {

namespace {

// Bounds-checked reader over one record's body (base's ByteReader over the ring buffer's std::byte): a read
// past the end yields zeros and clears ok().
class Reader {
 public:
  Reader(const std::byte* p, const std::byte* end)
      : r_{reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(end)} {}
  bool ok() const { return !r_.bad; }
  uint64_t u64() { return r_.get<uint64_t>(); }
  void u32x2(uint32_t& a, uint32_t& b) {
    const uint64_t v = u64();
    a = static_cast<uint32_t>(v);
    b = static_cast<uint32_t>(v >> 32);
  }
  std::span<const std::byte> bytes(uint64_t n) {
    if (!r_.need(n)) return {};
    auto s = std::span<const std::byte>(reinterpret_cast<const std::byte*>(r_.p), n);
    r_.p += n;
    return s;
  }
  // A NUL-terminated string padded to 8 bytes, followed by the sample_id trailer (24 bytes: TID, TIME, CPU).
  std::string_view str_before_trailer() const {
    const size_t n = r_.left() - std::min<size_t>(r_.left(), 24);
    auto* s = reinterpret_cast<const char*>(r_.p);
    return std::string_view(s, strnlen(s, n));
  }

 private:
  ByteReader r_;
};

// The sample_id_all trailer: pid/tid, time, cpu/res (zeros in a record too short to hold one).
struct Trailer {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
};
Trailer trailer(const std::byte* rec, size_t size) {
  Trailer t;
  if (size < 8 + 24) return t;
  const std::byte* p = rec + size - 24;
  std::memcpy(&t.pid, p, 4);
  std::memcpy(&t.tid, p + 4, 4);
  std::memcpy(&t.time, p + 8, 8);
  return t;
}

std::string_view without_deleted(std::string_view path) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
  return path;
}

// The body after the fixed start (ip, pid/tid, time, cpu), which the caller has read.
void decode_sample_body(Reader& r, const RecordLayout& layout, SampleRecord& s) {
  if (layout.period) r.u64();  // absent with a fixed period (-e)
  const uint64_t nr = r.u64();
  if (nr > (uint64_t{1} << 16)) return;  // a corrupt count (nr * 8 would wrap to a short read)
  s.chain = r.bytes(nr * 8);
  if (!r.ok()) return;
  s.ok = true;
  // Registers: perf writes them in bit order of the event's mask; the unwinder's are picked out of it, and
  // RDI (the context-switches event's: a futex wait's lock address).
  bool regs_read = false;
  if (layout.dwarf || s.switch_event) {
    const uint64_t mask = s.switch_event ? layout.switch_regs_mask : layout.regs_mask;
    if (r.u64() != PERF_SAMPLE_REGS_ABI_NONE) {
      auto bytes = r.bytes(uint64_t{static_cast<uint32_t>(__builtin_popcountll(mask))} * 8);
      if (r.ok()) {
        s.has_regs = regs_read = true;
        size_t i = 0;
        for (uint64_t m = mask; m; m &= m - 1, ++i) {
          const uint64_t bit = m & (~m + 1);
          uint64_t v;
          std::memcpy(&v, bytes.data() + i * 8, 8);
          if (bit == kPerfRegDiBit) s.di = v;
          if ((layout.regs_mask & bit) && s.n_regs < s.regs.size()) s.regs[s.n_regs++] = v;
        }
      }
    }
  }
  if (!layout.dwarf) return;
  if (const uint64_t size = r.u64()) {
    s.stack = r.bytes(size);
    const uint64_t dyn = r.u64();
    if (dyn < s.stack.size()) s.stack = s.stack.first(dyn);
  }
  s.unwindable = regs_read && r.ok();
}

SampleRecord decode_sample(const std::byte* p, size_t size, const RecordLayout& layout, bool switch_event) {
  SampleRecord s;
  s.switch_event = switch_event;
  Reader r(p + 8, p + size);
  r.u64();  // ip (the callchain repeats it)
  r.u32x2(s.pid, s.tid);
  s.time = r.u64();
  r.u64();  // cpu
  if (r.ok()) decode_sample_body(r, layout, s);
  return s;
}

Record decode_mmap2(const std::byte* p, size_t size) {
  Reader r(p + 8, p + size);
  Mmap2Record m;
  r.u32x2(m.pid, m.tid);
  m.addr = r.u64();
  m.len = r.u64();
  m.pgoff = r.u64();
  r.u32x2(m.maj, m.min);
  m.ino = r.u64();
  r.u64();  // ino_generation
  r.u32x2(m.prot, m.flags);
  if (!r.ok()) return OtherRecord{};
  m.path = without_deleted(r.str_before_trailer());
  m.time = trailer(p, size).time;
  return m;
}

Record decode_comm(const std::byte* p, size_t size, uint16_t misc) {
  Reader r(p + 8, p + size);
  CommRecord c;
  r.u32x2(c.pid, c.tid);
  if (!r.ok()) return OtherRecord{};
  c.exec = (misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
  c.comm = r.str_before_trailer();
  c.time = trailer(p, size).time;
  return c;
}

template <class T>
Record decode_task(const std::byte* p, size_t size) {
  Reader r(p + 8, p + size);
  T t;
  r.u32x2(t.pid, t.ppid);
  r.u32x2(t.tid, t.ptid);
  t.time = r.u64();
  if (!r.ok()) return OtherRecord{};
  return t;
}

}  // namespace

RecordLayout RecordLayout::of(const EventConfig& events) {
  RecordLayout l;
  l.period = (events.sample_type() & PERF_SAMPLE_PERIOD) != 0;
  l.dwarf = events.dwarf;
  l.regs_mask = events.regs_mask;
  l.switch_regs_mask = events.switch_regs_mask;
  return l;
}

Record decode(const perf_event_header* h, const RecordLayout& layout, bool switch_event) {
  auto* p = reinterpret_cast<const std::byte*>(h);
  const size_t size = h->size;
  if (size < sizeof *h) return OtherRecord{};
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      // Header, ip, pid/tid, time: the fixed start of every sample we ask for.
      if (size < 32) return OtherRecord{};
      return decode_sample(p, size, layout, switch_event);
    case PERF_RECORD_MMAP2:
      return decode_mmap2(p, size);
    case PERF_RECORD_COMM:
      return decode_comm(p, size, h->misc);
    case PERF_RECORD_FORK:
      return decode_task<ForkRecord>(p, size);
    case PERF_RECORD_EXIT:
      return decode_task<ExitRecord>(p, size);
    case PERF_RECORD_SWITCH: {
      const Trailer t = trailer(p, size);
      return SwitchRecord{t.pid, t.tid, t.time, (h->misc & PERF_RECORD_MISC_SWITCH_OUT) != 0,
                          (h->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0};
    }
    case PERF_RECORD_LOST: {
      Reader r(p + 8, p + size);
      r.u64();  // id
      LostRecord l;
      l.lost = r.u64();
      if (!r.ok()) return OtherRecord{};
      const Trailer t = trailer(p, size);
      l.tid = t.tid;
      l.time = t.time;
      return l;
    }
    case PERF_RECORD_THROTTLE:
      return ThrottleRecord{trailer(p, size).time};
    default:
      return OtherRecord{};
  }
}

uint64_t record_time(const perf_event_header* h) {
  auto* p = reinterpret_cast<const std::byte*>(h);
  uint64_t t = 0;
  if (h->size < 32) return 0;
  if (h->type == PERF_RECORD_SAMPLE)
    std::memcpy(&t, p + 24, 8);  // header, ip, pid/tid, time
  else
    std::memcpy(&t, p + h->size - 16, 8);
  return t;
}

}  // namespace fxprof::recorder
