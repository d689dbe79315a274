// fxprof recorder: perf records decoded once, into typed records (the one place that knows their byte
// layouts).
//
// The kernel writes what make_attr (recorder/perf.h) asked for: samples of IP, TID, TIME, CPU, [PERIOD],
// CALLCHAIN and, in DWARF mode or on the context-switches event, REGS_USER [+ STACK_USER]; the other records
// with the sample_id_all trailer (pid/tid, time, cpu). decode() reads one record, bounds-checked (it is the
// fuzz target fuzz/fuzz_records.cpp: a wrong size must never read past the record), into a Record whose
// spans and string views point into the record itself: they are valid as long as its bytes are (until the
// RecordSource's release(), recorder/host.h).
#pragma once

#include <linux/perf_event.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <variant>

#include "recorder/perf.h"

namespace fxprof::recorder {

// PERF_RECORD_SAMPLE. `ok`: the callchain was read (a record too short for it is counted nowhere).
struct SampleRecord {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  bool switch_event = false;  // from a context-switches event's buffer (its register mask)
  bool ok = false;
  std::span<const std::byte> chain;  // callchain entries, 8 bytes each (unaligned: read with chain_at)
  // User registers: `regs` holds the unwinder's (EventConfig::regs_mask bits, in bit order), `di` RDI when
  // the mask has it. `unwindable`: registers and stack copy read whole (DWARF mode).
  bool has_regs = false, unwindable = false;
  std::array<uint64_t, 8> regs{};
  uint8_t n_regs = 0;
  uint64_t di = 0;
  std::span<const std::byte> stack;  // the user stack copy, cut to its dynamic size

  size_t chain_size() const { return chain.size() / 8; }
  uint64_t chain_at(size_t i) const {
    uint64_t v;
    std::memcpy(&v, chain.data() + i * 8, 8);
    return v;
  }
};

struct Mmap2Record {
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0;
  uint32_t prot = 0, flags = 0;
  std::string_view path;  // without a " (deleted)" suffix
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

struct SwitchRecord {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  bool out = false, preempted = false;  // a switch-out, and whether the thread was still runnable
};

struct LostRecord {
  uint64_t lost = 0;
  uint32_t tid = 0;
  uint64_t time = 0;
};

struct ThrottleRecord {
  uint64_t time = 0;
};

// A record the builder has no use for (UNTHROTTLE, NAMESPACES, ...), or one too short for its type.
struct OtherRecord {};

using Record = std::variant<OtherRecord, SampleRecord, Mmap2Record, CommRecord, ForkRecord, ExitRecord,
                            SwitchRecord, LostRecord, ThrottleRecord>;

// What decode() needs to know of the events that wrote the records.
struct RecordLayout {
  bool period = true;             // samples carry PERIOD (not with a fixed `-e` period)
  bool dwarf = false;             // samples carry REGS_USER and STACK_USER
  uint64_t regs_mask = 0;         // the CPU event's REGS_USER mask (the unwinder's registers)
  uint64_t switch_regs_mask = 0;  // the context-switches event's (regs_mask plus RDI)

  static RecordLayout of(const EventConfig& events);
};

// One record; `switch_event`: it came from a context-switches event's buffer.
Record decode(const perf_event_header* h, const RecordLayout& layout, bool switch_event = false);
// A record's time (a sample's own, or the sample_id_all trailer's), for merging buffers: 0 when too short.
uint64_t record_time(const perf_event_header* h);

}  // namespace fxprof::recorder
