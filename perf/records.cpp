#include "perf/records.h"

#include <sys/mman.h>

#include <algorithm>

#include "base/byte_reader.h"

namespace fxprof::perf {

namespace {

// Newer than some kernels' headers: perf writes them all the same.
constexpr uint64_t kBranchHwIndex = uint64_t{1} << 17;
constexpr uint64_t kBranchCounters = uint64_t{1} << 19;
constexpr uint64_t kFormatLost = 1 << 4;
constexpr uint16_t kMiscMmapBuildId = 1 << 14;
constexpr uint16_t kMiscMmapData = 1 << 13;
constexpr uint32_t kSwitchCpuWide = 15;

// Bounds-checked reader over one record's body: a read past the end yields zeros and clears ok().
class Reader {
 public:
  Reader(const std::byte* p, const std::byte* end)
      : r_{reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(end)} {}
  bool ok() const { return !r_.bad; }
  uint64_t u64() { return r_.get<uint64_t>(); }
  uint32_t u32() { return r_.get<uint32_t>(); }
  void u32x2(uint32_t& a, uint32_t& b) {
    const uint64_t v = u64();
    a = static_cast<uint32_t>(v);
    b = static_cast<uint32_t>(v >> 32);
  }
  void skip(uint64_t n) { (void)bytes(n); }
  std::span<const std::byte> bytes(uint64_t n) {
    if (!r_.need(n)) return {};
    auto s = std::span<const std::byte>(reinterpret_cast<const std::byte*>(r_.p), n);
    r_.p += n;
    return s;
  }
  // A NUL-terminated string padded to 8 bytes, followed by a trailer of `trailer` bytes.
  std::string_view str_before(size_t trailer) const {
    const size_t n = r_.left() - std::min<size_t>(r_.left(), trailer);
    auto* s = reinterpret_cast<const char*>(r_.p);
    return std::string_view(s, strnlen(s, n));
  }

 private:
  ByteReader r_;
};

size_t bits(uint64_t v) { return static_cast<size_t>(__builtin_popcountll(v)); }

// The sample_id trailer of a non-sample record: its size, and its fields (zeros when the record is too
// short).
size_t trailer_size(const EventAttr& a) {
  if (!a.sample_id_all) return 0;
  const uint64_t t = a.sample_type;
  return 8 * bits(t & (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                       PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER));
}

struct Trailer {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  uint32_t cpu = 0;
};
Trailer trailer(const std::byte* rec, size_t size, const EventAttr& a) {
  Trailer t;
  const size_t n = trailer_size(a);
  if (n == 0 || size < 8 + n) return t;
  Reader r(rec + size - n, rec + size);
  if (a.sample_type & PERF_SAMPLE_TID) r.u32x2(t.pid, t.tid);
  if (a.sample_type & PERF_SAMPLE_TIME) t.time = r.u64();
  if (a.sample_type & PERF_SAMPLE_ID) r.u64();
  if (a.sample_type & PERF_SAMPLE_STREAM_ID) r.u64();
  if (a.sample_type & PERF_SAMPLE_CPU) {
    uint32_t reserved = 0;
    r.u32x2(t.cpu, reserved);
  }
  return t;
}

std::string_view without_deleted(std::string_view path) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
  return path;
}

// { u64 abi; u64 regs[popcount(mask)]; }: the unwinder's registers picked out into `s` when `keep`.
bool read_regs(Reader& r, uint64_t mask, uint64_t want, SampleRecord* keep) {
  if (r.u64() == PERF_SAMPLE_REGS_ABI_NONE) return false;
  auto b = r.bytes(uint64_t{bits(mask)} * 8);
  if (!r.ok() || !keep) return false;
  size_t i = 0;
  for (uint64_t m = mask; m; m &= m - 1, ++i) {
    const uint64_t bit = m & (~m + 1);
    uint64_t v;
    std::memcpy(&v, b.data() + i * 8, 8);
    if (bit == kPerfRegDiBit) keep->di = v;
    if ((want & bit) != 0) {
      const size_t at = bits(want & (bit - 1));
      if (at < keep->regs.size()) keep->regs[at] = v;
    }
  }
  keep->n_regs = static_cast<uint8_t>(std::min(bits(want), keep->regs.size()));
  return true;
}

void skip_read(Reader& r, uint64_t f) {
  if (!(f & PERF_FORMAT_GROUP)) {
    r.u64();
    if (f & PERF_FORMAT_TOTAL_TIME_ENABLED) r.u64();
    if (f & PERF_FORMAT_TOTAL_TIME_RUNNING) r.u64();
    if (f & PERF_FORMAT_ID) r.u64();
    if (f & kFormatLost) r.u64();
    return;
  }
  const uint64_t nr = r.u64();
  if (f & PERF_FORMAT_TOTAL_TIME_ENABLED) r.u64();
  if (f & PERF_FORMAT_TOTAL_TIME_RUNNING) r.u64();
  const uint64_t each = 8 * (1 + ((f & PERF_FORMAT_ID) ? 1 : 0) + ((f & kFormatLost) ? 1 : 0));
  if (nr > (uint64_t{1} << 20)) return r.skip(~uint64_t{0});  // a corrupt count
  r.skip(nr * each);
}

void skip_branch_stack(Reader& r, uint64_t branch_type) {
  const uint64_t nr = r.u64();
  if (branch_type & kBranchHwIndex) r.u64();
  if (nr > (uint64_t{1} << 16)) return r.skip(~uint64_t{0});
  r.skip(nr * 24);
  if (branch_type & kBranchCounters) r.skip(nr * 8);
}

// The fields after the callchain: skipped, but for the user registers and stack copy.
void decode_after_chain(Reader& r, const EventAttr& a, uint64_t want, SampleRecord& s) {
  const uint64_t t = a.sample_type;
  if (t & PERF_SAMPLE_RAW) s.raw = r.bytes(r.u32());
  if (t & PERF_SAMPLE_BRANCH_STACK) skip_branch_stack(r, a.branch_sample_type);
  bool regs_read = false;
  if (t & PERF_SAMPLE_REGS_USER) s.has_regs = regs_read = read_regs(r, a.regs_user, want, &s);
  if (t & PERF_SAMPLE_STACK_USER) {
    if (const uint64_t size = r.u64()) {
      s.stack = r.bytes(size);
      const uint64_t dyn = r.u64();
      if (dyn < s.stack.size()) s.stack = s.stack.first(dyn);
    }
    s.unwindable = regs_read && r.ok();
  }
}

Record decode_sample(const std::byte* p, size_t size, const EventAttr& a, uint64_t want, uint32_t event) {
  const uint64_t t = a.sample_type;
  SampleRecord s;
  s.event = event;
  Reader r(p + 8, p + size);
  if (t & PERF_SAMPLE_IDENTIFIER) r.u64();
  if (t & PERF_SAMPLE_IP) r.u64();  // the callchain repeats it
  if (t & PERF_SAMPLE_TID) r.u32x2(s.pid, s.tid);
  if (t & PERF_SAMPLE_TIME) s.time = r.u64();
  if (!r.ok()) return OtherRecord{};
  if (t & PERF_SAMPLE_ADDR) r.u64();
  if (t & PERF_SAMPLE_ID) r.u64();
  if (t & PERF_SAMPLE_STREAM_ID) r.u64();
  if (t & PERF_SAMPLE_CPU) s.cpu = static_cast<uint32_t>(r.u64());
  if (t & PERF_SAMPLE_PERIOD) s.period = r.u64();
  if (t & PERF_SAMPLE_READ) skip_read(r, a.read_format);
  if (t & PERF_SAMPLE_CALLCHAIN) {
    const uint64_t nr = r.u64();
    if (nr > (uint64_t{1} << 16)) return s;  // a corrupt count (nr * 8 would wrap to a short read)
    s.chain = r.bytes(nr * 8);
  }
  if (!r.ok()) return s;
  s.ok = true;
  // The rest (WEIGHT, DATA_SRC, TRANSACTION, REGS_INTR, PHYS_ADDR, CGROUP, page sizes, AUX) follows the
  // stack copy, and nothing fxprof keeps comes after it.
  decode_after_chain(r, a, want, s);
  return s;
}

Record decode_mmap(const std::byte* p, size_t size, uint16_t misc, const EventAttr& a, bool v2) {
  Reader r(p + 8, p + size);
  Mmap2Record m;
  r.u32x2(m.pid, m.tid);
  m.addr = r.u64();
  m.len = r.u64();
  m.pgoff = r.u64();
  if (v2) {
    if (misc & kMiscMmapBuildId) {
      const auto id = r.bytes(24);  // u8 size, 3 reserved, 20 bytes
      if (r.ok()) m.build_id = id.subspan(4, std::min<size_t>(20, static_cast<size_t>(id[0])));
    } else {
      r.u32x2(m.maj, m.min);
      m.ino = r.u64();
      r.u64();  // ino_generation
    }
    r.u32x2(m.prot, m.flags);
  } else {
    m.prot = (misc & kMiscMmapData) ? PROT_READ : PROT_READ | PROT_EXEC;
  }
  if (!r.ok()) return OtherRecord{};
  m.path = without_deleted(r.str_before(trailer_size(a)));
  m.time = trailer(p, size, a).time;
  return m;
}

Record decode_comm(const std::byte* p, size_t size, uint16_t misc, const EventAttr& a) {
  Reader r(p + 8, p + size);
  CommRecord c;
  r.u32x2(c.pid, c.tid);
  if (!r.ok()) return OtherRecord{};
  c.exec = (misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
  c.comm = r.str_before(trailer_size(a));
  c.time = trailer(p, size, a).time;
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

// { u32 pid, tid; read_format's value or group } then the trailer.
Record decode_read(const std::byte* p, size_t size, const EventAttr& a) {
  Reader r(p + 8, p + size - std::min(size - 8, trailer_size(a)));
  ReadRecord rr;
  r.u32x2(rr.pid, rr.tid);
  const uint64_t f = a.read_format;
  rr.has_id = (f & PERF_FORMAT_ID) != 0;
  rr.is_group = (f & PERF_FORMAT_GROUP) != 0;
  rr.stride = 8 * (1 + (rr.has_id ? 1 : 0) + ((f & kFormatLost) ? 1 : 0));
  const uint64_t n = rr.is_group ? r.u64() : 0;
  if (!rr.is_group) rr.value = r.u64();
  if (f & PERF_FORMAT_TOTAL_TIME_ENABLED) rr.enabled = r.u64();
  if (f & PERF_FORMAT_TOTAL_TIME_RUNNING) rr.running = r.u64();
  if (rr.is_group) {
    if (n > size / rr.stride) return OtherRecord{};  // a count that lies
    rr.group = r.bytes(n * rr.stride);
  } else {
    if (rr.has_id) rr.id = r.u64();
    if (f & kFormatLost) r.u64();
  }
  if (!r.ok()) return OtherRecord{};
  rr.time = trailer(p, size, a).time;
  return rr;
}

const EventAttr& attr_at(const Layout& layout, uint32_t event) {
  static const EventAttr kNone{};
  const auto& attrs = layout.attrs();
  return event < attrs.size() ? attrs[event] : kNone;
}

// Where a record's id is (bytes from its start), by the first event's sample_type (perf requires every
// event of a stream to put it at the same place); 0 when it has none.
size_t id_offset(const perf_event_header* h, const EventAttr& a) {
  const uint64_t t = a.sample_type;
  if (h->type == PERF_RECORD_SAMPLE) {
    if (t & PERF_SAMPLE_IDENTIFIER) return 8;
    if (!(t & PERF_SAMPLE_ID)) return 0;
    return 8 + 8 * bits(t & (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR));
  }
  if (!a.sample_id_all || h->type >= PERF_RECORD_MAX) return 0;
  // Counted from the end: a record too short for it has none (the subtraction would wrap).
  const size_t back = (t & PERF_SAMPLE_IDENTIFIER) ? 8
                      : (t & PERF_SAMPLE_ID) ? 8 * (1 + bits(t & (PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU)))
                                             : 0;
  return back && h->size >= 8 + back ? h->size - back : 0;
}

}  // namespace

EventAttr EventAttr::of(const perf_event_attr& attr) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  std::memcpy(&a, &attr, std::min<size_t>(attr.size ? attr.size : sizeof a, sizeof a));
  EventAttr e;
  e.sample_type = a.sample_type;
  e.read_format = a.read_format;
  e.regs_user = a.sample_regs_user;
  e.regs_intr = a.sample_regs_intr;
  e.branch_sample_type = a.branch_sample_type;
  e.sample_id_all = a.sample_id_all != 0;
  return e;
}

uint32_t Layout::event_of(const perf_event_header* h, uint32_t hint) const {
  if (ids_.empty() || attrs_.empty()) return hint;
  const size_t at = id_offset(h, attrs_[0]);
  if (at < 8 || at > h->size || h->size - at < 8) return hint;
  uint64_t id;
  std::memcpy(&id, reinterpret_cast<const std::byte*>(h) + at, 8);
  auto it = ids_.find(id);
  return it == ids_.end() ? hint : it->second;
}

Record decode(const perf_event_header* h, const Layout& layout, uint32_t event) {
  auto* p = reinterpret_cast<const std::byte*>(h);
  const size_t size = h->size;
  if (size < sizeof *h) return OtherRecord{};
  event = layout.event_of(h, event);
  const EventAttr& a = attr_at(layout, event);
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      return decode_sample(p, size, a, layout.unwind_regs, event);
    case PERF_RECORD_MMAP2:
      return decode_mmap(p, size, h->misc, a, true);
    case PERF_RECORD_MMAP:
      return decode_mmap(p, size, h->misc, a, false);
    case PERF_RECORD_COMM:
      return decode_comm(p, size, h->misc, a);
    case PERF_RECORD_FORK:
      return decode_task<ForkRecord>(p, size);
    case PERF_RECORD_EXIT:
      return decode_task<ExitRecord>(p, size);
    case PERF_RECORD_SWITCH:
    case kSwitchCpuWide: {
      const Trailer t = trailer(p, size, a);
      return SwitchRecord{t.pid, t.tid, t.time, (h->misc & PERF_RECORD_MISC_SWITCH_OUT) != 0,
                          (h->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0};
    }
    case PERF_RECORD_LOST: {
      Reader r(p + 8, p + size);
      r.u64();  // id
      LostRecord l;
      l.lost = r.u64();
      if (!r.ok()) return OtherRecord{};
      const Trailer t = trailer(p, size, a);
      l.tid = t.tid;
      l.time = t.time;
      l.cpu = t.cpu;
      return l;
    }
    case PERF_RECORD_THROTTLE:
      return ThrottleRecord{trailer(p, size, a).time};
    case PERF_RECORD_READ:
      return decode_read(p, size, a);
    default:
      return OtherRecord{};
  }
}

size_t time_offset(const perf_event_header* h, const Layout& layout, uint32_t event) {
  if (h->size < sizeof *h) return 0;
  const EventAttr& a = attr_at(layout, layout.event_of(h, event));
  const uint64_t t = a.sample_type;
  if (!(t & PERF_SAMPLE_TIME)) return 0;
  size_t at = 0;
  if (h->type == PERF_RECORD_SAMPLE) {
    at = 8 + 8 * bits(t & (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID));
  } else {
    const size_t n = trailer_size(a);
    if (n == 0 || h->type >= PERF_RECORD_MAX || h->size < 8 + n) return 0;
    at = h->size - n + ((t & PERF_SAMPLE_TID) ? 8 : 0);
  }
  return at + 8 <= h->size ? at : 0;
}

uint64_t record_time(const perf_event_header* h, const Layout& layout, uint32_t event) {
  const size_t at = time_offset(h, layout, event);
  uint64_t t = 0;
  if (at) std::memcpy(&t, reinterpret_cast<const std::byte*>(h) + at, 8);
  return t;
}

}  // namespace fxprof::perf
