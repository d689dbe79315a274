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
  // Waiting for a signal (issue 38.8: sigsuspend was "Blocked: unknown").
  CHECK(classify({"__schedule", "schedule", "sigsuspend", "__x64_sys_rt_sigsuspend", "do_syscall_64"}) ==
        BlockReason::Signal);
  CHECK(classify({"__schedule", "schedule", "__x64_sys_pause", "do_syscall_64"}) == BlockReason::Signal);
  CHECK(classify({"__schedule", "schedule_hrtimeout_range_clock", "do_sigtimedwait.isra.0",
                  "__x64_sys_rt_sigtimedwait"}) == BlockReason::Signal);
  CHECK(reason_label(BlockReason::Signal) == "[blocked: signal]");
  CHECK(reason_text(BlockReason::Signal) == "signal");
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
