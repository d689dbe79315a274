// perf/records.h: records decoded by their event's attributes, every sample field perf can write skipped
// correctly, the event found by PERF_SAMPLE_IDENTIFIER or PERF_SAMPLE_ID.
#include "perf/records.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/perf/perf_bytes.h"

using namespace fxprof::perf;
using fxprof::test::Bytes;

namespace {

constexpr uint64_t kAllFields =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR |
    PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_READ |
    PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER |
    PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION |
    PERF_SAMPLE_REGS_INTR | PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_CGROUP | PERF_SAMPLE_DATA_PAGE_SIZE |
    PERF_SAMPLE_CODE_PAGE_SIZE | PERF_SAMPLE_AUX;

// A record in 8-byte aligned storage.
struct Aligned {
  explicit Aligned(const std::string& bytes) : words((bytes.size() + 7) / 8) {
    std::memcpy(words.data(), bytes.data(), bytes.size());
  }
  const perf_event_header* h() const { return reinterpret_cast<const perf_event_header*>(words.data()); }
  std::vector<uint64_t> words;
};

}  // namespace

TEST_CASE(
    "perf records: a sample with every field perf writes keeps its pid, time, cpu, chain, registers "
    "and stack",
    "[perf]") {
  EventAttr a;
  a.sample_type = kAllFields;
  a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED | (1 << 4);  // LOST
  a.regs_user = 0b1111;  // AX, BX, CX, DX
  a.regs_intr = 0b11;
  a.branch_sample_type = uint64_t{1} << 17;  // PERF_SAMPLE_BRANCH_HW_INDEX
  a.sample_id_all = true;
  Layout layout({a});
  layout.unwind_regs = 0b1010;  // BX and DX, in bit order
  Bytes b;
  b.u64(77);                                                           // identifier
  b.u64(0x401000);                                                     // ip
  b.u32x2(10, 11);                                                     // pid, tid
  b.u64(5000);                                                         // time
  b.u64(0xdead);                                                       // addr
  b.u64(77);                                                           // id
  b.u64(78);                                                           // stream id
  b.u32x2(3, 0);                                                       // cpu
  b.u64(250000);                                                       // period
  b.u64(2).u64(100);                                                   // read: nr, time enabled
  b.u64(1).u64(77).u64(0).u64(2).u64(78).u64(0);                       // read: value, id, lost twice
  b.u64(2).u64(0x401000).u64(0x402000);                                // callchain
  b.u32(12).put("rawbytes0123", 12);                                   // raw: 4 + 12 bytes
  b.u64(2).u64(9);                                                     // branch stack: nr, hw_idx
  for (int i = 0; i < 6; ++i) b.u64(i);                                // two {from, to, flags}
  b.u64(PERF_SAMPLE_REGS_ABI_64).u64(0xa).u64(0xb).u64(0xc).u64(0xd);  // regs user
  b.u64(16).u64(0x1111).u64(0x2222).u64(8);                            // stack user: size, data, dyn size
  b.u64(5).u64(6).u64(7);                                              // weight, data_src, transaction
  b.u64(PERF_SAMPLE_REGS_ABI_64).u64(1).u64(2);                        // regs intr
  b.u64(8).u64(9).u64(10).u64(11);                                     // phys addr, cgroup, page sizes
  b.u64(8).u64(0x42);                                                  // aux
  Aligned r(b.record(PERF_RECORD_SAMPLE));
  const Record d = decode(r.h(), layout);
  REQUIRE(std::holds_alternative<SampleRecord>(d));
  const SampleRecord& s = std::get<SampleRecord>(d);
  CHECK(s.ok);
  CHECK((s.pid == 10 && s.tid == 11 && s.time == 5000 && s.cpu == 3 && s.period == 250000));
  REQUIRE(s.chain_size() == 2);
  CHECK(s.chain_at(1) == 0x402000);
  CHECK((s.has_regs && s.unwindable));
  REQUIRE(s.n_regs == 2);
  CHECK((s.regs[0] == 0xb && s.regs[1] == 0xd));
  REQUIRE(s.stack.size() == 8);  // cut to its dynamic size
  CHECK(record_time(r.h(), layout) == 5000);
}

TEST_CASE("perf records: the event of a record found by its identifier or id, samples and trailers alike",
          "[perf]") {
  for (const bool identifier : {true, false}) {
    const uint64_t id_bit = identifier ? PERF_SAMPLE_IDENTIFIER : PERF_SAMPLE_ID;
    EventAttr a;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | id_bit | PERF_SAMPLE_CPU;
    a.sample_id_all = true;
    EventAttr c = a;
    c.sample_type |= PERF_SAMPLE_PERIOD;
    Layout layout({a, c});
    layout.add_id(100, 0);
    layout.add_id(200, 1);
    Bytes b;
    if (identifier) b.u64(200);
    b.u64(0x401000).u32x2(1, 2).u64(900);
    if (!identifier) b.u64(200);
    b.u32x2(0, 0).u64(1234);  // cpu, then the second event's period
    Aligned smp(b.record(PERF_RECORD_SAMPLE));
    const SampleRecord s = std::get<SampleRecord>(decode(smp.h(), layout));
    CHECK(s.event == 1);
    CHECK(s.period == 1234);
    // A COMM's trailer: pid/tid, time, [id], cpu, [identifier].
    Bytes t;
    t.u32x2(1, 2).str("worker");
    t.u32x2(1, 2).u64(800);
    if (!identifier) t.u64(100);
    t.u32x2(0, 0);
    if (identifier) t.u64(100);
    Aligned comm(t.record(PERF_RECORD_COMM));
    CHECK(layout.event_of(comm.h()) == 0);
    const CommRecord cr = std::get<CommRecord>(decode(comm.h(), layout));
    CHECK(cr.comm == "worker");
    CHECK(cr.time == 800);
  }
}

TEST_CASE("perf records: MMAP (perf's kernel and module maps) and MMAP2 with a build ID instead of an inode",
          "[perf]") {
  EventAttr a;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  a.sample_id_all = true;
  const Layout layout({a});
  Bytes m;
  m.u32x2(4, 4).u64(0x1000).u64(0x2000).u64(0).str("/usr/lib/libx.so").u32x2(4, 4).u64(66);
  Aligned mm(m.record(PERF_RECORD_MMAP));
  const Mmap2Record r = std::get<Mmap2Record>(decode(mm.h(), layout));
  CHECK(r.path == "/usr/lib/libx.so");
  CHECK(r.time == 66);
  CHECK((r.prot & 4) != 0);  // PROT_EXEC
  Bytes m2;
  m2.u32x2(4, 4).u64(0x1000).u64(0x2000).u64(0);
  m2.u32(20);  // build-id size, reserved
  for (int i = 0; i < 5; ++i) m2.u32(0x01020304);
  m2.u32x2(5, 2).str("/bin/y").u32x2(4, 4).u64(67);
  Aligned mm2(m2.record(PERF_RECORD_MMAP2, 1 << 14));
  const Mmap2Record r2 = std::get<Mmap2Record>(decode(mm2.h(), layout));
  CHECK(r2.path == "/bin/y");
  CHECK(r2.build_id.size() == 20);
  CHECK(r2.ino == 0);
}

TEST_CASE("perf records: counts that lie never read past the record", "[perf]") {
  EventAttr a;
  a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_READ | PERF_SAMPLE_CALLCHAIN |
                  PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_RAW;
  a.read_format = PERF_FORMAT_GROUP;
  const Layout layout({a});
  for (const uint64_t nr : {uint64_t{1} << 40, uint64_t{3}, ~uint64_t{0}}) {
    Bytes b;
    b.u32x2(1, 1).u64(5).u64(nr).u64(0);
    Aligned r(b.record(PERF_RECORD_SAMPLE));
    const Record d = decode(r.h(), layout);
    REQUIRE(std::holds_alternative<SampleRecord>(d));
    CHECK_FALSE(std::get<SampleRecord>(d).ok);
  }
}

TEST_CASE(
    "perf records: a READ record gives each value with its id, single or grouped, and a lying count is "
    "refused",
    "[perf]") {
  // `fxprof stat`'s layout: ENABLED | RUNNING | ID, no trailer.
  EventAttr single;
  single.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID;
  Bytes b;
  b.u32x2(40, 41).u64(12345).u64(900).u64(800).u64(7);  // pid, tid, value, enabled, running, id
  Aligned r(b.record(PERF_RECORD_READ));
  const Record d = decode(r.h(), Layout({single}));
  REQUIRE(std::holds_alternative<ReadRecord>(d));
  const auto& rd = std::get<ReadRecord>(d);
  CHECK(rd.pid == 40);
  CHECK(rd.tid == 41);
  REQUIRE(rd.count() == 1);
  CHECK(rd.value_at(0) == 12345);
  CHECK(rd.id_at(0) == 7);
  CHECK(rd.enabled == 900);
  CHECK(rd.running == 800);

  // A group with ids and lost counts, and a sample_id trailer (tid, time).
  EventAttr group;
  group.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED | (1 << 4);
  group.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  group.sample_id_all = true;
  Bytes g;
  g.u32x2(50, 51).u64(2).u64(1000);                   // pid, tid, nr, enabled
  g.u64(11).u64(101).u64(0).u64(22).u64(102).u64(0);  // {value, id, lost} twice
  g.u32x2(50, 51).u64(777);                           // trailer: pid, tid, time
  Aligned rg(g.record(PERF_RECORD_READ));
  const Record dg = decode(rg.h(), Layout({group}));
  REQUIRE(std::holds_alternative<ReadRecord>(dg));
  const auto& rdg = std::get<ReadRecord>(dg);
  REQUIRE(rdg.count() == 2);
  CHECK(rdg.value_at(1) == 22);
  CHECK(rdg.id_at(1) == 102);
  CHECK(rdg.time == 777);

  // nr says 1000 entries in a record of two: not read past its end.
  Bytes lie;
  lie.u32x2(50, 51).u64(1000).u64(1000).u64(11).u64(101).u64(0);
  Aligned rl(lie.record(PERF_RECORD_READ));
  CHECK(std::holds_alternative<OtherRecord>(decode(rl.h(), Layout({group}))));
}
