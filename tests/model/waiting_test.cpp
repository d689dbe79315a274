// model::add_waiting_counters: the "Threads waiting" counter from lock waits.
#include <catch2/catch.hpp>
#include <cstdint>

#include "model/profile.h"

using namespace fxprof::model;

TEST_CASE("off-CPU: the Threads waiting counter counts each thread once per interval it waited on a lock",
          "[model]") {
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
    Wait w;  // the typed wait the counter reads: a lock wait is a futex's with a lock address
    w.start_ns = m.start_ns;
    w.end_ns = m.end_ns;
    w.reason = name == lock ? WaitReason::Futex : WaitReason::Io;
    w.lock = name == lock ? 0x1000 : 0;
    w.marker = static_cast<uint32_t>(t.markers.size() - 1);
    t.waits.push_back(w);
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
  Thread& t = qp.threads.emplace_back();
  Wait w;
  w.reason = WaitReason::Futex;
  w.lock = 0x1000;
  w.start_ns = 0;
  w.end_ns = ms;  // cell 0 only (the end is exclusive)
  t.waits.push_back(w);
  w.start_ns = 100 * ms;
  w.end_ns = 101 * ms + 1;
  t.waits.push_back(w);
  add_waiting_counters(q, ms);
  got.clear();
  for (const CounterSample& s : q.processes[0].counters.at(0).samples)
    got.emplace_back(s.time_ns / ms, s.delta);
  const std::vector<std::pair<uint64_t, int64_t>> want2 = {{0, 1},   {1, 0},   {99, 0},
                                                           {100, 1}, {101, 1}, {102, 0}};
  CHECK(got == want2);
}
