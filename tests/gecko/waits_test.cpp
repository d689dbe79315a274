// Typed waits (model/waits.h) through the Gecko file: the writer writes the markers made from them, the
// reader reads the same waits back, and writing what was read gives the same file.
#include "model/waits.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "gecko/gecko.h"
#include "gecko/gecko_reader.h"
#include "tests/support/support.h"

using namespace fxprof;
using namespace fxprof::model;

namespace {

constexpr uint64_t kT0 = 1'000'000'000'000, ms = 1'000'000;

std::vector<std::string> stack_names(const Profile& p, StackId s) {
  std::vector<std::string> out;
  for (; s != kNoStack; s = p.stacks.prefix(s))
    out.push_back(std::string(p.strings.get(p.frames.get(p.stacks.frame(s)).name)));
  return out;
}

}  // namespace

TEST_CASE("waits: written as their markers and read back as the same typed waits", "[gecko][waits]") {
  Profile p;
  p.meta.start_monotonic_ns = kT0;
  Process& proc = p.processes.emplace_back();
  proc.pid = 100;
  proc.name = "app";
  proc.start_ns = kT0;
  proc.threads.resize(2);
  Thread& holder = proc.threads[0];
  holder.tid = 100;
  holder.name = "app";
  holder.is_main = true;
  Thread& waiter = proc.threads[1];
  waiter.tid = 101;
  waiter.name = "worker";
  auto label = [&](const char* s) { return p.label_frame(s, Category::User); };
  const StackId blocking = p.stacks.intern_path(std::vector<FrameId>{label("worker_main"), label("lock")});
  const StackId waker =
      p.stacks.intern_path(std::vector<FrameId>{label("main"), label("update_table"), label("unlock")});
  const StringId off = p.strings.intern("OffCpu");
  auto add = [&](Wait w) {
    Marker m;
    m.start_ns = w.start_ns;
    m.end_ns = w.end_ns;
    m.phase = MarkerPhase::Interval;
    m.category = Category::Idle;
    m.type = off;
    m.stack = blocking;
    w.marker = static_cast<uint32_t>(waiter.markers.size());
    waiter.markers.push_back(m);
    waiter.waits.push_back(w);
    make_wait_marker(p, waiter, w);
  };
  Wait lock{.start_ns = kT0 + 10 * ms,
            .end_ns = kT0 + 20 * ms,
            .reason = WaitReason::Futex,
            .waker = Waker::Thread,
            .lock = 0x55d0001000,
            .waker_pid = 100,
            .waker_tid = 100,
            .waker_name = p.strings.intern("app"),
            .wake_ns = kT0 + 19 * ms,
            .waker_stack = waker,
            .holder = p.strings.intern("update_table")};
  add(lock);
  add({.start_ns = kT0 + 20 * ms,
       .end_ns = kT0 + 21 * ms,
       .reason = WaitReason::Preempted,
       .wake_ns = kT0 + 21 * ms});
  add({.start_ns = kT0 + 30 * ms,
       .end_ns = kT0 + 40 * ms,
       .reason = WaitReason::Sleep,
       .waker = Waker::Timer,
       .wake_ns = kT0 + 40 * ms});
  add({.start_ns = kT0 + 40 * ms,
       .end_ns = kT0 + 50 * ms,
       .reason = WaitReason::Io,
       .waker = Waker::Interrupt,
       .wake_ns = kT0 + 50 * ms});
  add({.start_ns = kT0 + 50 * ms,
       .end_ns = kT0 + 60 * ms,
       .reason = WaitReason::Io,
       .waker = Waker::Untraced,
       .waker_pid = 4242,
       .wake_ns = kT0 + 60 * ms});
  add({.start_ns = kT0 + 60 * ms,
       .end_ns = kT0 + 70 * ms,
       .reason = WaitReason::Condition,
       .waker = Waker::Thread,
       .waker_pid = 100,
       .waker_tid = 100,
       .waker_name = p.strings.intern("app"),
       .wake_ns = kT0 + 70 * ms});
  add({.start_ns = kT0 + 70 * ms,
       .end_ns = kT0 + 80 * ms,
       .reason = WaitReason::NoStack,
       .wake_ns = kT0 + 80 * ms});
  // The waker's side of the lock wait, as the recorder makes it.
  Marker w;
  w.name = w.type = p.strings.intern("Wakeup");
  w.start_ns = lock.wake_ns;
  w.stack = waker;
  w.fields.push_back({p.strings.intern("wakee"), true, 0, p.strings.intern("worker 101")});
  holder.markers.push_back(w);
  CHECK(p.strings.get(waiter.markers[0].name) == "Lock wait");
  CHECK(p.strings.get(waiter.markers[1].name) == "Preempted");
  CHECK(p.strings.get(waiter.markers[2].name) == "Blocked");

  test::TempDir dir;
  const std::string first = dir.file("1.json"), second = dir.file("2.json");
  REQUIRE(gecko::write_gecko_profile(p, first));
  auto back = gecko::read_gecko_profile(first);
  REQUIRE(back.ok());
  const Thread* t = nullptr;
  for (const Thread& th : back->processes[0].threads)
    if (th.tid == 101) t = &th;
  REQUIRE(t);
  REQUIRE(t->waits.size() == waiter.waits.size());
  for (size_t i = 0; i < t->waits.size(); ++i) {
    INFO("wait " << i);
    const Wait &a = waiter.waits[i], &b = t->waits[i];
    CHECK(b.start_ns == a.start_ns);
    CHECK(b.end_ns == a.end_ns);
    CHECK(b.reason == a.reason);
    CHECK(b.waker == a.waker);
    CHECK(b.lock == a.lock);
    CHECK(b.waker_pid == a.waker_pid);
    CHECK(b.waker_tid == a.waker_tid);
    CHECK(b.wake_ns == a.wake_ns);
    CHECK((b.waker_name == kNoString ? "" : back->strings.get(b.waker_name)) ==
          (a.waker_name == kNoString ? "" : p.strings.get(a.waker_name)));
    CHECK((b.holder == kNoString ? "" : back->strings.get(b.holder)) ==
          (a.holder == kNoString ? "" : p.strings.get(a.holder)));
    CHECK(stack_names(*back, b.waker_stack) == stack_names(p, a.waker_stack));
    CHECK(b.marker == a.marker);
  }
  REQUIRE(gecko::write_gecko_profile(*back, second));
  CHECK(test::read_profile_text(first) == test::read_profile_text(second));
}
