// The agent's sender (agent/sender.h) with a push that blocks on a handshake: while a window is being
// sent, at most Sender::kMaxWaiting wait; each one offered beyond drops the oldest, counted; nothing is
// lost uncounted. Counts come from the handshake, not from timing.
#include "agent/sender.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>

using fxprof::Status;
using fxprof::agent::Sender;
using fxprof::agent::Window;

namespace {

// A gate the push waits at: entered() says a push is under way, open() lets every push through.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int entered = 0;
  bool open = false;
  void pass() {
    std::unique_lock lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
  void wait_entered(int n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return entered >= n; });
  }
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

Window window(uint64_t n) {
  Window w;
  w.number = n;
  w.from_unix_ms = n * 1000;
  w.until_unix_ms = (n + 1) * 1000;
  return w;
}

}  // namespace

TEST_CASE("agent sender: a slow push keeps at most 3 windows waiting, the rest dropped and counted",
          "[agent]") {
  Gate gate;
  std::mutex mu;
  std::vector<uint64_t> pushed;
  auto prepare = [](Window& w) { w.series.push_back({{{"__name__", "process_cpu"}}, "x"}); };
  auto push = [&](const Window& w) {
    gate.pass();
    std::lock_guard lock(mu);
    pushed.push_back(w.number);
    return Status{};
  };
  Sender sender(prepare, push, 1, 0.01);
  sender.offer(window(1));
  gate.wait_entered(1);  // window 1 is being sent: the next ones wait
  for (uint64_t n = 2; n <= 8; ++n) sender.offer(window(n));
  gate.release();
  sender.finish();
  const auto c = sender.counts();
  CHECK(c.sent == 4);     // 1, then the 3 last offered: 6, 7, 8
  CHECK(c.dropped == 4);  // 2..5, dropped unsent
  CHECK(pushed == std::vector<uint64_t>{1, 6, 7, 8});
}

TEST_CASE("agent sender: a window refused every try is dropped after --attempts tries, counted", "[agent]") {
  std::mutex mu;
  std::condition_variable cv;
  int tries = 0;
  auto prepare = [](Window& w) { w.series.push_back({{{"__name__", "process_cpu"}}, "x"}); };
  auto refuse = [&](const Window&) -> Status {
    std::lock_guard lock(mu);
    ++tries;
    cv.notify_all();
    return fxprof::Err("down");
  };
  Sender sender(prepare, refuse, 3, 0.001);
  sender.offer(window(1));
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return tries == 3; });
  }
  sender.finish();
  CHECK(tries == 3);
  CHECK(sender.counts().dropped == 1);
  CHECK(sender.counts().sent == 0);
}
