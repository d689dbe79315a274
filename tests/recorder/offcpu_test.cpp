// Off-CPU reasons from kernel frame names (recorder/offcpu.h); the real-kernel tests are in
// tests/e2e/offcpu_test.cpp.
#include "recorder/offcpu.h"

#include <catch2/catch.hpp>
#include <string_view>
#include <vector>

#include "model/profile.h"

using namespace fxprof::recorder;

namespace {
BlockReason classify(std::vector<std::string_view> names) { return classify_kernel_frames(names); }
}  // namespace

TEST_CASE("off-CPU reasons: the kernel frames under the scheduler name the wait", "[recorder][offcpu]") {
  CHECK(classify({"__schedule", "schedule", "futex_wait_queue", "__futex_wait", "futex_wait", "do_futex",
                  "__x64_sys_futex", "do_syscall_64"}) == BlockReason::Futex);
  CHECK(classify({"__schedule", "schedule", "do_nanosleep", "hrtimer_nanosleep", "common_nsleep",
                  "__x64_sys_clock_nanosleep"}) == BlockReason::Sleep);
  CHECK(classify({"__schedule", "schedule", "pipe_read", "vfs_read", "ksys_read"}) == BlockReason::Io);
  CHECK(classify({"__schedule", "schedule", "schedule_hrtimeout_range", "ep_poll.isra.0", "do_epoll_wait"}) ==
        BlockReason::Io);
  // A fault that waited for a page is a page fault, whatever system call it happened in.
  CHECK(classify({"__schedule", "schedule", "io_schedule", "folio_wait_bit_common", "filemap_fault",
                  "__do_fault", "handle_mm_fault", "do_user_addr_fault", "exc_page_fault", "pipe_write"}) ==
        BlockReason::PageFault);
  CHECK(classify({"__schedule", "schedule", "do_wait", "kernel_wait4"}) == BlockReason::Unknown);
  CHECK(classify({}) == BlockReason::Unknown);
  // Prefixes are whole names: futex_wake is a futex, do_nanosleep_foo is not a sleep.
  CHECK(classify({"do_nanosleep_foo"}) == BlockReason::Unknown);
  CHECK(reason_label(BlockReason::Io) == "[blocked: I/O]");
  CHECK(reason_label(BlockReason::Preempted) == "[preempted]");
  CHECK(reason_label(BlockReason::Unknown) == "[blocked]");
  CHECK(reason_text(BlockReason::PageFault) == "page fault");
}

TEST_CASE("off-CPU: the Threads waiting counter counts each thread once per interval it waited on a lock",
          "[recorder][offcpu]") {
  using namespace fxprof::model;
  constexpr uint64_t ms = 1000000;
  Profile p;
  p.processes.resize(2);
  Process& proc = p.processes[0];
  proc.start_ns = 1000 * ms;
  const StringId lock = p.strings.intern("Lock wait"), blocked = p.strings.intern("Blocked");
  auto wait = [&](Thread& t, StringId name, double from_ms, double to_ms) {
    Marker m;
    m.name = name;
    m.start_ns = proc.start_ns + static_cast<uint64_t>(from_ms * 1e6);
    m.end_ns = proc.start_ns + static_cast<uint64_t>(to_ms * 1e6);
    m.phase = MarkerPhase::Interval;
    t.markers.push_back(m);
  };
  proc.threads.resize(2);
  Thread& a = proc.threads[0];
  Thread& b = proc.threads[1];
  wait(a, lock, 2.5, 5.5);     // cells 2..5
  wait(a, lock, 5.7, 5.9);     // cell 5 again: a still counts once there
  wait(b, lock, 4.0, 4.5);     // cell 4
  wait(b, blocked, 8.0, 9.0);  // not a lock wait: not counted
  wait(p.processes[1].threads.emplace_back(), blocked, 1, 2);

  add_waiting_counters(p, ms);
  REQUIRE(p.processes[0].counters.size() == 1);
  CHECK(p.processes[1].counters.empty());  // no lock waits: no track
  const Counter& c = p.processes[0].counters[0];
  CHECK(c.name == "Threads waiting");
  std::vector<std::pair<uint64_t, int64_t>> got;
  for (const CounterSample& s : c.samples) got.emplace_back((s.time_ns - proc.start_ns) / ms, s.delta);
  // A zero cell before and after the run, every cell in between on the grid.
  const std::vector<std::pair<uint64_t, int64_t>> want = {{1, 0}, {2, 1}, {3, 1}, {4, 2}, {5, 1}, {6, 0}};
  CHECK(got == want);

  // Two runs far apart: each is framed by zeros, nothing in the gap.
  Profile q;
  Process& qp = q.processes.emplace_back();
  const StringId ql = q.strings.intern("Lock wait");
  Thread& t = qp.threads.emplace_back();
  Marker m;
  m.name = ql;
  m.start_ns = 0;
  m.end_ns = ms;  // cell 0 only (the end is exclusive)
  t.markers.push_back(m);
  m.start_ns = 100 * ms;
  m.end_ns = 101 * ms + 1;
  t.markers.push_back(m);
  add_waiting_counters(q, ms);
  got.clear();
  for (const CounterSample& s : q.processes[0].counters.at(0).samples)
    got.emplace_back(s.time_ns / ms, s.delta);
  const std::vector<std::pair<uint64_t, int64_t>> want2 = {{0, 1},   {1, 0},   {99, 0},
                                                           {100, 1}, {101, 1}, {102, 0}};
  CHECK(got == want2);
}
