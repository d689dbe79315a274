// recorder/records.h: each perf record type decoded into its typed struct, under each sample layout, and
// records cut short decoded as what survives (never read past their size).
#include "recorder/records.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "recorder/unwind/unwinder.h"
#include "tests/recorder/synthetic.h"

using namespace fxprof::recorder;
using fxprof::test::Rec;
using fxprof::test::sample_start;

TEST_CASE("records: a frame-pointer sample, its callchain and its time", "[recorder]") {
  const RecordLayout fp;
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  Rec r = sample_start(7, 8, 12345, {user, 0x401000, 0x401234});
  const perf_event_header* h = r.h();
  CHECK(record_time(h) == 12345);
  auto d = decode(h, fp);
  REQUIRE(std::holds_alternative<SampleRecord>(d));
  const SampleRecord& s = std::get<SampleRecord>(d);
  CHECK(s.ok);
  CHECK((s.pid == 7 && s.tid == 8 && s.time == 12345));
  REQUIRE(s.chain_size() == 3);
  CHECK(s.chain_at(0) == user);
  CHECK(s.chain_at(2) == 0x401234);
  CHECK_FALSE(s.has_regs);
  CHECK_FALSE(s.unwindable);

  // Without PERIOD (a fixed `-e` period) the count comes one word earlier.
  RecordLayout no_period;
  no_period.period = false;
  Rec q(PERF_RECORD_SAMPLE);
  q.u64(0).u32x2(7, 8).u64(1).u64(0).u64(1).u64(0x401000);
  auto dq = std::get<SampleRecord>(decode(q.h(), no_period));
  REQUIRE(dq.ok);
  REQUIRE(dq.chain_size() == 1);
  CHECK(dq.chain_at(0) == 0x401000);
}

TEST_CASE("records: a DWARF sample's registers and stack copy, and RDI from the context-switches event",
          "[recorder]") {
  RecordLayout dwarf;
  dwarf.dwarf = true;
  dwarf.regs_mask = user_regs_mask();
  dwarf.switch_regs_mask = dwarf.regs_mask | kPerfRegDiBit;
  const size_t n = static_cast<size_t>(__builtin_popcountll(dwarf.regs_mask));
  auto make = [&](bool with_di, uint64_t stack_bytes, uint64_t dyn) {
    Rec r = sample_start(7, 8, 99, {0x401000});
    r.u64(PERF_SAMPLE_REGS_ABI_64);
    // Registers in bit order: with RDI (bit 5) it comes after BX (bit 3), before BP (bit 6).
    const uint64_t mask = with_di ? dwarf.switch_regs_mask : dwarf.regs_mask;
    uint64_t i = 0;
    for (uint64_t m = mask; m; m &= m - 1) r.u64((m & (~m + 1)) == kPerfRegDiBit ? 0xd1 : 0x100 + i++);
    r.u64(stack_bytes);
    for (uint64_t k = 0; k < stack_bytes / 8; ++k) r.u64(k);
    if (stack_bytes) r.u64(dyn);
    return r;
  };
  Rec cpu = make(false, 64, 40);
  auto s = std::get<SampleRecord>(decode(cpu.h(), dwarf));
  CHECK((s.ok && s.has_regs && s.unwindable));
  REQUIRE(s.n_regs == n);
  CHECK(s.regs[0] == 0x100);
  CHECK(s.regs[n - 1] == 0x100 + n - 1);
  CHECK(s.di == 0);
  CHECK(s.stack.size() == 40);  // cut to its dynamic size

  Rec sw = make(true, 64, 64);
  auto t = std::get<SampleRecord>(decode(sw.h(), dwarf, true));
  CHECK(t.switch_event);
  CHECK(t.di == 0xd1);
  REQUIRE(t.n_regs == n);  // the unwinder's registers only, RDI picked out
  CHECK(t.regs[n - 1] == 0x100 + n - 1);
  CHECK(t.stack.size() == 64);

  // The stack copy cut short: the callchain stays usable, the walk does not.
  Rec cut = make(false, 64, 64);
  auto c = std::get<SampleRecord>(decode(cut.h(8 + 48 + 8 + 8 + 8 * n + 8 + 16), dwarf));
  CHECK(c.ok);
  CHECK(c.chain_size() == 1);
  CHECK_FALSE(c.unwindable);
}

TEST_CASE("records: samples cut short or with a corrupt count", "[recorder]") {
  const RecordLayout fp;
  Rec r = sample_start(7, 8, 5, {0x401000, 0x401100});
  // 24 bytes: no time yet (too short to be a sample).
  CHECK(std::holds_alternative<OtherRecord>(decode(r.h(24), fp)));
  // The fixed start is there, the callchain is not: the thread is known, the sample is not usable.
  auto s = std::get<SampleRecord>(decode(r.h(56), fp));
  CHECK((s.tid == 8 && s.time == 5));
  CHECK_FALSE(s.ok);
  Rec wrap(PERF_RECORD_SAMPLE);
  wrap.u64(0).u32x2(7, 8).u64(5).u64(0).u64(1).u64(uint64_t{1} << 61).u64(0x401000);  // nr * 8 wraps to 0
  CHECK_FALSE(std::get<SampleRecord>(decode(wrap.h(), fp)).ok);
}

TEST_CASE("records: mmap2, comm, fork, exit, switch, lost, throttle", "[recorder]") {
  const RecordLayout fp;
  Rec m(PERF_RECORD_MMAP2);
  m.u32x2(7, 8).u64(0x400000).u64(0x2000).u64(0x1000).u32x2(8, 1).u64(1234).u64(0).u32x2(5, 2);
  m.str("/usr/bin/prog (deleted)").trailer(7, 8, 77);
  auto mm = std::get<Mmap2Record>(decode(m.h(), fp));
  CHECK((mm.pid == 7 && mm.addr == 0x400000 && mm.len == 0x2000 && mm.pgoff == 0x1000));
  CHECK((mm.maj == 8 && mm.min == 1 && mm.ino == 1234 && mm.prot == 5 && mm.flags == 2));
  CHECK(mm.path == "/usr/bin/prog");
  CHECK(mm.time == 77);
  CHECK(record_time(m.h()) == 77);
  CHECK(std::holds_alternative<OtherRecord>(decode(m.h(40), fp)));  // cut before its protection

  Rec c(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
  c.u32x2(7, 7).str("python3").trailer(7, 7, 88);
  auto cc = std::get<CommRecord>(decode(c.h(), fp));
  CHECK((cc.exec && cc.comm == "python3" && cc.time == 88));
  Rec rename(PERF_RECORD_COMM);
  rename.u32x2(7, 9).str("worker-with-a-long-name").trailer(7, 9, 89);
  auto rn = std::get<CommRecord>(decode(rename.h(), fp));
  CHECK((!rn.exec && rn.tid == 9 && rn.comm == "worker-with-a-long-name"));

  Rec f(PERF_RECORD_FORK);
  f.u32x2(10, 7).u32x2(11, 8).u64(90).trailer(10, 11, 90);
  auto ff = std::get<ForkRecord>(decode(f.h(), fp));
  CHECK((ff.pid == 10 && ff.ppid == 7 && ff.tid == 11 && ff.ptid == 8 && ff.time == 90));
  Rec e(PERF_RECORD_EXIT);
  e.u32x2(10, 7).u32x2(11, 8).u64(91).trailer(10, 11, 91);
  CHECK(std::get<ExitRecord>(decode(e.h(), fp)).time == 91);
  CHECK(std::holds_alternative<OtherRecord>(decode(e.h(20), fp)));

  Rec out(PERF_RECORD_SWITCH, PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
  out.trailer(7, 8, 92);
  auto so = std::get<SwitchRecord>(decode(out.h(), fp));
  CHECK((so.out && so.preempted && so.tid == 8 && so.time == 92));
  Rec in(PERF_RECORD_SWITCH);
  in.trailer(7, 8, 93);
  auto si = std::get<SwitchRecord>(decode(in.h(), fp));
  CHECK((!si.out && !si.preempted && si.time == 93));

  Rec l(PERF_RECORD_LOST);
  l.u64(1).u64(17).trailer(7, 8, 94);
  auto ll = std::get<LostRecord>(decode(l.h(), fp));
  CHECK((ll.lost == 17 && ll.tid == 8 && ll.time == 94));
  Rec t(PERF_RECORD_THROTTLE);
  t.u64(95).u64(1).trailer(7, 8, 95);
  CHECK(std::get<ThrottleRecord>(decode(t.h(), fp)).time == 95);
  Rec u(PERF_RECORD_UNTHROTTLE);
  u.u64(96).u64(1).trailer(7, 8, 96);
  CHECK(std::holds_alternative<OtherRecord>(decode(u.h(), fp)));
}
