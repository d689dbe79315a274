// `report --wait-blame` (sinks/critical_path_report.h) on a hand-made profile with known answers: each wait
// on the path goes to the stack that ended it; timer wakes are left out unless asked for.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sinks/critical_path_report.h"

using namespace fxprof;
using namespace fxprof::model;

namespace {

constexpr uint64_t ms = 1'000'000;

struct Blamed {
  Profile p;
  StackId unlock_b, post_c;
  Blamed() {
    Process& proc = p.processes.emplace_back();
    proc.pid = 1;
    proc.threads.resize(3);
    const char* names[] = {"A", "B", "C"};
    for (uint32_t i = 0; i < 3; ++i) {
      proc.threads[i].tid = 10 + i;
      proc.threads[i].name = names[i];
    }
    proc.threads[0].is_main = true;
    auto fn = [&](const char* name) {
      return p.frames.intern({0, p.strings.intern(name), FrameKind::Label, Category::User});
    };
    unlock_b = p.stacks.intern_path(std::vector<FrameId>{fn("b_main"), fn("update_table"), fn("unlock")});
    post_c = p.stacks.intern_path(std::vector<FrameId>{fn("c_main"), fn("post")});
    // A waits: [0,100] ended by B, [100,150] by a timer, [150,200] by C, [200,230] by B again.
    wait(0, 100, Waker::Thread, 11, unlock_b);
    wait(100, 150, Waker::Timer, 0, kNoStack);
    wait(150, 200, Waker::Thread, 12, post_c);
    wait(200, 230, Waker::Thread, 11, unlock_b);
  }
  void wait(uint64_t from, uint64_t to, Waker waker, uint32_t tid, StackId stack) {
    Wait w;
    w.start_ns = from * ms;
    w.end_ns = w.wake_ns = to * ms;
    w.reason = WaitReason::Futex;
    w.waker = waker;
    w.waker_pid = 1;
    w.waker_tid = tid;
    w.waker_stack = stack;
    p.processes[0].threads[0].waits.push_back(w);
  }
  sinks::WaitBlame blame(bool irq) {
    const Process& proc = p.processes[0];
    std::vector<CriticalPath> paths{critical_path(p, proc, proc.threads[0], 0, 230 * ms)};
    return sinks::make_wait_blame(p, paths, "the whole thread", irq, 10);
  }
};

}  // namespace

TEST_CASE("wait blame: each wait goes to the stack that ended it, timers left out by default",
          "[sinks][critical]") {
  Blamed b;
  const sinks::WaitBlame r = b.blame(false);
  CHECK(r.waiting_ns == 230 * ms);
  CHECK(r.left_out_ns == 50 * ms);
  REQUIRE(r.wakers.size() == 2);
  CHECK(r.wakers[0].waker == "B (tid 11)");
  CHECK(r.wakers[0].ns == 130 * ms);
  CHECK(r.wakers[0].waits == 2);
  CHECK(r.wakers[0].stack == std::vector<std::string>{"unlock", "update_table", "b_main"});
  CHECK(r.wakers[1].waker == "C (tid 12)");
  CHECK(r.wakers[1].ns == 50 * ms);
  const std::string text = sinks::format_wait_blame(r);
  INFO(text);
  CHECK(text.find("--include-irq") != std::string::npos);
  CHECK(text.find("update_table") != std::string::npos);

  const sinks::WaitBlame all = b.blame(true);
  CHECK(all.left_out_ns == 0);
  REQUIRE(all.wakers.size() == 3);
  CHECK(all.wakers[2].waker == "[timer]");
  CHECK(all.wakers[2].ns == 50 * ms);
}
