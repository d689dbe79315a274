// fxprof perf layer: perf records decoded once, into typed records, driven by the attributes of the events
// that wrote them (the one place in fxprof that knows the records' byte layouts).
//
// A record's layout is not fixed: each event's perf_event_attr says which sample fields the kernel writes
// (sample_type, in the order perf_event.h lists them), how a READ value looks (read_format), whether the
// other records carry a sample_id trailer (sample_id_all) and which registers come with REGS_USER and
// REGS_INTR. A stream of several events says which one wrote a record by PERF_SAMPLE_IDENTIFIER (the first
// word of a sample, the last of the trailer) or PERF_SAMPLE_ID (at a position the sample_type gives). Every
// field perf can write is skipped correctly even when fxprof does not use it; what it keeps is the typed
// record below. Both sources use it: the live recorder (recorder/records.h: its two events' attributes,
// the buffer saying which) and perf.data files (perf/data_file.h: the file's attributes, by id).
//
// decode() is bounds-checked (fuzz/fuzz_records.cpp, fuzz/fuzz_perf_data.cpp): a wrong size never reads past
// the record. The spans and string views of a Record point into the record itself: valid as long as its
// bytes are.
#pragma once

#include <linux/perf_event.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace fxprof::perf {

// PERF_RECORD_SAMPLE. `ok`: the fields up to and including the callchain were read.
struct SampleRecord {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  uint32_t cpu = 0;
  uint64_t period = 0;
  uint32_t event = 0;         // the index of the event (attribute) that wrote it
  bool switch_event = false;  // the recorder's: from a context-switches event's buffer
  bool ok = false;
  std::span<const std::byte> chain;  // callchain entries, 8 bytes each (unaligned: read with chain_at)
  // User registers: `regs` holds the unwinder's (Layout::unwind_regs bits, in bit order), `di` RDI when the
  // event's mask has it. `unwindable`: registers and stack copy read whole (DWARF mode).
  bool has_regs = false, unwindable = false;
  std::array<uint64_t, 8> regs{};
  uint8_t n_regs = 0;
  uint64_t di = 0;
  std::span<const std::byte> stack;  // the user stack copy, cut to its dynamic size
  std::span<const std::byte> raw;    // PERF_SAMPLE_RAW: a tracepoint's fields (perf/tracepoints.h reads them)

  size_t chain_size() const { return chain.size() / 8; }
  uint64_t chain_at(size_t i) const {
    uint64_t v;
    std::memcpy(&v, chain.data() + i * 8, 8);
    return v;
  }
};

// PERF_RECORD_MMAP2, and PERF_RECORD_MMAP (perf.data's kernel and module mappings) as one.
struct Mmap2Record {
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0;
  uint32_t prot = 0, flags = 0;
  std::string_view path;                // without a " (deleted)" suffix
  std::span<const std::byte> build_id;  // PERF_RECORD_MISC_MMAP_BUILD_ID: the build ID instead of the inode
  uint64_t time = 0;
};

struct CommRecord {
  uint32_t pid = 0, tid = 0;
  bool exec = false;  // PERF_RECORD_MISC_COMM_EXEC: the pid runs a new program
  std::string_view comm;
  uint64_t time = 0;
};

// PERF_RECORD_FORK and PERF_RECORD_EXIT (the same layout).
struct TaskRecord {
  uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  uint64_t time = 0;
};
struct ForkRecord : TaskRecord {};
struct ExitRecord : TaskRecord {};

// PERF_RECORD_SWITCH and PERF_RECORD_SWITCH_CPU_WIDE (the task is the trailer's).
struct SwitchRecord {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  bool out = false, preempted = false;  // a switch-out, and whether the thread was still runnable
};

struct LostRecord {
  uint64_t lost = 0;
  uint32_t tid = 0;
  uint64_t time = 0;
  uint32_t cpu = 0;  // the CPU whose buffer overflowed (0 without PERF_SAMPLE_CPU)
};

struct ThrottleRecord {
  uint64_t time = 0;
};

// PERF_RECORD_READ: an inherited counter's value at a thread's exit (inherit_stat), laid out by the event's
// read_format: one value, or a group's (PERF_FORMAT_GROUP), each with its id when read_format has
// PERF_FORMAT_ID.
struct ReadRecord {
  uint32_t pid = 0, tid = 0;
  uint64_t enabled = 0, running = 0;  // 0 unless read_format asks for them
  uint64_t time = 0;
  uint64_t value = 0, id = 0;        // a single read's
  std::span<const std::byte> group;  // a group's entries, `stride` bytes each: value[, id][, lost]
  size_t stride = 8;
  bool is_group = false, has_id = false;

  size_t count() const { return is_group ? group.size() / stride : 1; }
  uint64_t value_at(size_t i) const { return is_group ? word(i, 0) : value; }
  uint64_t id_at(size_t i) const { return !has_id ? 0 : is_group ? word(i, 1) : id; }

 private:
  uint64_t word(size_t i, size_t k) const {
    uint64_t v;
    std::memcpy(&v, group.data() + i * stride + k * 8, 8);
    return v;
  }
};

// A record fxprof has no use for (UNTHROTTLE, NAMESPACES, ...), or one too short for its type.
struct OtherRecord {};

using Record = std::variant<OtherRecord, SampleRecord, Mmap2Record, CommRecord, ForkRecord, ExitRecord,
                            SwitchRecord, LostRecord, ThrottleRecord, ReadRecord>;

// What decoding needs of one event's perf_event_attr.
struct EventAttr {
  uint64_t sample_type = 0;
  uint64_t read_format = 0;
  uint64_t regs_user = 0, regs_intr = 0;  // sample_regs_user, sample_regs_intr
  uint64_t branch_sample_type = 0;
  bool sample_id_all = false;

  // `attr` as the kernel or a file holds it: fields past its own `size` read as 0.
  static EventAttr of(const perf_event_attr& attr);
};

// The events of one stream: their attributes, and which ids each one's records carry.
class Layout {
 public:
  Layout() = default;
  explicit Layout(std::vector<EventAttr> attrs) : attrs_(std::move(attrs)) {}

  void add_id(uint64_t id, uint32_t event) { ids_[id] = event; }
  const std::vector<EventAttr>& attrs() const { return attrs_; }
  bool has_ids() const { return !ids_.empty(); }
  // The event that wrote `h`: by its id when the stream has several events with ids, else `hint`.
  uint32_t event_of(const perf_event_header* h, uint32_t hint = 0) const;

  // The user registers SampleRecord::regs keeps, in bit order (the unwinder's: recorder/unwind/unwinder.h).
  uint64_t unwind_regs = 0;

 private:
  std::vector<EventAttr> attrs_;
  std::unordered_map<uint64_t, uint32_t> ids_;
};

// One record; `event`: the index of the attribute that wrote it, when the stream has no ids.
Record decode(const perf_event_header* h, const Layout& layout, uint32_t event = 0);
// A record's time (a sample's own, or the sample_id trailer's), for ordering: 0 when it has none.
uint64_t record_time(const perf_event_header* h, const Layout& layout, uint32_t event = 0);
// Where that time is in the record (bytes from its start), to stamp records that have none; 0 when nowhere.
size_t time_offset(const perf_event_header* h, const Layout& layout, uint32_t event = 0);

// The user registers captured with a sample (PERF_SAMPLE_REGS_USER) that unwinding needs: x86-64's IP, SP and
// its callee-saved registers (a caller's CFA or saved values may live in any of them; caller-saved registers
// are dead at a call). aarch64 would add LR. The unwinder decodes them (recorder/unwind/unwinder.h).
struct UserRegs {
  uint64_t ip = 0;
  uint64_t sp = 0;
  uint64_t bp = 0;
  uint64_t bx = 0;
  uint64_t r12 = 0, r13 = 0, r14 = 0, r15 = 0;
};

// perf_regs.h (x86-64) bit of RDI, the first system-call argument.
inline constexpr uint64_t kPerfRegDiBit = uint64_t{1} << 5;

}  // namespace fxprof::perf
