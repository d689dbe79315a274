// Off-CPU reasons from kernel frame names (recorder/offcpu.h); the real-kernel tests are in
// tests/e2e/offcpu_test.cpp.
#include "recorder/offcpu.h"

#include <catch2/catch.hpp>
#include <string_view>
#include <vector>

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
