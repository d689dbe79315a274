// Off-CPU reasons from kernel frame names, lock holders and the waiting-threads counter (recorder/offcpu.h),
// the waker tracer's records (recorder/waker.h); the real-kernel tests are in tests/e2e/offcpu_test.cpp.
#include "recorder/offcpu.h"

#include <catch2/catch.hpp>
#include <string_view>
#include <vector>

#include "model/profile.h"
#include "recorder/waker.h"

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
  // Linux 6.18's real stacks (perf record -e sched:sched_switch -g): ep_poll and do_poll are inlined.
  CHECK(classify({"__schedule", "schedule", "schedule_hrtimeout_range_clock", "do_epoll_wait",
                  "__x64_sys_epoll_wait", "do_syscall_64"}) == BlockReason::Io);
  CHECK(classify({"__schedule", "schedule", "schedule_hrtimeout_range_clock", "do_epoll_wait",
                  "__x64_sys_epoll_pwait"}) == BlockReason::Io);
  CHECK(classify({"__schedule", "schedule", "schedule_hrtimeout_range_clock",
                  "poll_schedule_timeout.constprop.0", "do_sys_poll", "__x64_sys_poll"}) == BlockReason::Io);
  CHECK(classify({"__schedule", "schedule", "schedule_hrtimeout_range_clock",
                  "poll_schedule_timeout.constprop.0", "do_select", "core_sys_select",
                  "do_pselect.constprop.0", "__x64_sys_pselect6"}) == BlockReason::Io);
  CHECK(classify({"__schedule", "schedule", "anon_pipe_read"}) == BlockReason::Io);
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

TEST_CASE("off-CPU: the eBPF waker tracer's records decode, and encode back for captures",
          "[recorder][offcpu]") {
  Waking w;
  w.time = 123456789;
  w.waker_pid = 10;
  w.waker_tid = 11;
  w.wakee_pid = 10;
  w.wakee_tid = 12;
  w.uaddr = 0x55d876a400c0;
  w.flags = kWakeInterrupt;
  w.regs = {.ip = 1, .sp = 2, .bp = 3, .bx = 4, .r12 = 5, .r13 = 6, .r14 = 7, .r15 = 8};
  for (int i = 0; i < 100; ++i) w.stack.push_back(static_cast<std::byte>(i));
  std::vector<std::byte> bytes;
  encode_waking(w, bytes);
  REQUIRE(bytes.size() == kWakingHeaderBytes + 100);
  Waking back;
  REQUIRE(decode_waking(bytes, back));
  CHECK(back.time == w.time);
  CHECK(back.waker_tid == 11);
  CHECK(back.wakee_tid == 12);
  CHECK(back.uaddr == w.uaddr);
  CHECK(back.flags == kWakeInterrupt);
  CHECK(back.regs.sp == 2);
  CHECK(back.regs.r15 == 8);
  CHECK(back.stack == w.stack);
  // An ids-only record (no futex wake) is the header alone.
  Waking ids;
  ids.waker_tid = 7;
  bytes.clear();
  encode_waking(ids, bytes);
  REQUIRE(decode_waking(bytes, back));
  CHECK(back.waker_tid == 7);
  CHECK(back.stack.empty());
  // Shorter than it says: refused, never read past the end.
  bytes.clear();
  encode_waking(w, bytes);
  CHECK(!decode_waking(std::span(bytes).first(kWakingHeaderBytes + 50), back));
  CHECK(!decode_waking(std::span(bytes).first(10), back));
}

TEST_CASE("off-CPU: the function that held a lock is the waker stack's first one outside the lock code",
          "[recorder][offcpu]") {
  CHECK(is_lock_plumbing("libc.so.6", "__GI___lll_lock_wake"));
  CHECK(is_lock_plumbing("libc.so.6", "start_thread"));  // the whole of libc
  CHECK(is_lock_plumbing("app", "std::sys::sync::mutex::futex::Mutex::wake"));
  CHECK(is_lock_plumbing("app", "std::sys_common::mutex::MovableMutex::raw_unlock"));  // rustc before 1.72
  CHECK(is_lock_plumbing("app", "pthread_mutex_unlock"));
  CHECK(!is_lock_plumbing("app", "update_table"));
  // C++ lock wrappers inlined into the program (std::lock_guard's destructor): their caller held the lock.
  CHECK(is_lock_plumbing("app", "__gthread_mutex_unlock(pthread_mutex_t*)"));
  CHECK(is_lock_plumbing("app", "std::mutex::unlock()"));
  CHECK(is_lock_plumbing("app", "std::lock_guard<std::mutex>::~lock_guard()"));
  CHECK(is_lock_plumbing("app", "std::unique_lock<std::mutex>::unlock()"));
  CHECK(!is_lock_plumbing("app", "std::vector<int>::push_back(int const&)"));
  CHECK(!is_lock_plumbing("libapp.so", "std::vector<int>::push_back"));

  using namespace fxprof::model;
  Profile p;
  p.binaries.push_back({.name = "libc.so.6"});
  p.binaries.push_back({.name = "app"});
  auto frame = [&](BinaryId b, const char* name) {
    Frame f;
    f.address = p.frames.size() + 1;
    f.binary = b;
    f.name = name ? p.strings.intern(name) : kNoString;
    return p.frames.intern(f);
  };
  // Root first: start_thread, worker, update_table, pthread_mutex_unlock, __lll_lock_wake.
  const std::vector<FrameId> path = {frame(0, "start_thread"), frame(1, "worker"), frame(1, "update_table"),
                                     frame(0, "pthread_mutex_unlock"), frame(0, "__lll_lock_wake")};
  const StackId waker = p.stacks.intern_path(path);
  CHECK(lock_holder(p, waker) == "update_table");
  // Not symbolicated: no name rather than a wrong one.
  const StackId raw =
      p.stacks.intern_path(std::vector<FrameId>{frame(1, "worker"), frame(kNoBinary, nullptr)});
  CHECK(lock_holder(p, raw).empty());

  // add_lock_holders: the Lock wait that the Wakeup ended (the wakee's, containing its time) gets "holder";
  // lock_wait_summary names it.
  Process& proc = p.processes.emplace_back();
  proc.threads.resize(2);
  Thread& holder = proc.threads[0];
  holder.tid = 20;
  holder.name = "app";
  Thread& waiter = proc.threads[1];
  waiter.tid = 21;
  waiter.name = "app";
  const StringId lock_wait = p.strings.intern("Lock wait"), lock_key = p.strings.intern("lock"),
                 addr = p.strings.intern("0x1000");
  for (uint64_t start : {100, 300}) {
    Marker m;
    m.name = lock_wait;
    m.start_ns = start;
    m.end_ns = start + 100;
    m.phase = MarkerPhase::Interval;
    m.fields.push_back({lock_key, true, 0, addr});
    waiter.markers.push_back(m);
  }
  Marker w;
  w.name = p.strings.intern("Wakeup");
  w.start_ns = 190;  // ends the first wait only
  w.stack = waker;
  w.fields.push_back({p.strings.intern("wakee"), true, 0, p.strings.intern("app 21")});
  w.fields.push_back({lock_key, true, 0, addr});
  holder.markers.push_back(w);
  add_lock_holders(p);
  add_lock_holders(p);  // idempotent
  auto holder_of = [&](const Marker& m) {
    std::vector<std::string_view> out;
    for (const MarkerField& f : m.fields)
      if (p.strings.get(f.key) == "holder") out.push_back(p.strings.get(f.string));
    return out;
  };
  CHECK(holder_of(waiter.markers[0]) == std::vector<std::string_view>{"update_table"});
  CHECK(holder_of(waiter.markers[1]).empty());
  CHECK(lock_wait_summary(p, 3) == "0x1000 0.0 ms in 2 waits by 1 thread held by update_table");
}
