// recorder/wakes.h, the builder's wakers tracker: the eBPF tracer's wakeups and synthetic switch records
// through the RecordSource boundary (tests/recorder/synthetic.h); no perf, no eBPF, no root.
#include "recorder/wakes.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/builder.h"
#include "tests/recorder/synthetic.h"

using namespace fxprof;
using test::Rec;

namespace {

Rec switch_at(uint32_t pid, uint32_t tid, uint64_t time, bool out) {
  Rec r(PERF_RECORD_SWITCH, out ? PERF_RECORD_MISC_SWITCH_OUT : 0);
  r.trailer(pid, tid, time);
  return r;
}

recorder::Waking wake(uint64_t time, uint32_t waker_pid, uint32_t waker_tid, uint32_t wakee_tid,
                      uint32_t flags = 0) {
  recorder::Waking w;
  w.time = time;
  w.waker_pid = waker_pid;
  w.waker_tid = waker_tid;
  w.wakee_pid = 100;
  w.wakee_tid = wakee_tid;
  w.flags = flags;
  return w;
}

std::string field(const model::Profile& p, const model::Marker& m, const std::string& key) {
  for (const model::MarkerField& f : m.fields)
    if (p.strings.get(f.key) == key) return std::string(p.strings.get(f.string));
  return "(none)";
}

}  // namespace

TEST_CASE("wakes: each wait names the thread that woke it, an untraced waker by its pid", "[recorder]") {
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  recorder::OffCpuConfig oc;
  oc.spans = true;
  oc.threshold_ns = 1000000;
  builder.set_off_cpu(oc);
  builder.on_launched(100, "prog", 0);
  builder.on_attached_thread(100, 101, 0);
  // Thread 101 waits 1-5 ms, woken at 3 ms by thread 100; then 6-9 ms, woken at 8 ms by an untraced pid;
  // then 10-12 ms, woken by nobody the tracer saw.
  std::vector<recorder::Waking> w = {wake(3000000, 100, 100, 101),
                                     wake(8000000, 555, 556, 101, recorder::kWakeUntraced)};
  builder.on_wakings(w);
  std::vector<Rec> recs = {switch_at(100, 101, 1000000, true),  switch_at(100, 101, 5000000, false),
                           switch_at(100, 101, 6000000, true),  switch_at(100, 101, 9000000, false),
                           switch_at(100, 101, 10000000, true), switch_at(100, 101, 12000000, false)};
  test::Records src;
  for (Rec& r : recs) src.add(r);
  REQUIRE(recorder::feed_round(src, builder) == 6);
  builder.on_end(13000000);

  CHECK(builder.wakes() == 2);
  CHECK(builder.waker_stacks() == 0);  // no stacks (and no unwinder): no Wakeup markers
  const model::Thread& t = profile.processes.at(0).threads.at(1);
  REQUIRE(t.tid == 101);
  std::vector<std::string> seen;
  for (const model::Marker& m : t.markers)
    seen.push_back(std::string(profile.strings.get(m.name)) + " " + std::to_string(m.start_ns / 1000000) +
                   "-" + std::to_string(m.end_ns / 1000000) + " " + field(profile, m, "waker"));
  // A wake splits its wait: blocked up to the wake, preempted (waiting for a CPU) after it, not woken.
  CHECK(seen == std::vector<std::string>{"Blocked 1-3 " + profile.processes[0].threads[0].name + " 100",
                                         "Preempted 3-5 (none)", "Blocked 6-8 pid 555 (not recorded)",
                                         "Preempted 8-9 (none)", "Blocked 10-12 (none)"});
  for (const model::Thread& th : profile.processes[0].threads)
    for (const model::Marker& m : th.markers) CHECK(profile.strings.get(m.name) != "Wakeup");
}

TEST_CASE("wakes: a wake stamped just before the wait's switch-out still names its waker", "[recorder]") {
  // The kernel's sched_waking fires once the waker finds the wakee in its sleeping state, which the wakee
  // sets before it leaves the CPU: its switch-out can be stamped after the wake (10 us seen with both CPUs
  // busy). Such a wake ends the wait that starts just after it, not one further away or before.
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  recorder::OffCpuConfig oc;
  oc.spans = true;
  oc.threshold_ns = 0;
  builder.set_off_cpu(oc);
  builder.on_launched(100, "prog", 0);
  builder.on_attached_thread(100, 101, 0);
  // Thread 101 (times in us): out 1000-2000, woken at 1500 by 100 inside; out 3010-4000, woken at 3000 by
  // 100, 10 us before it left; out 6000-7000, the last wake 1.5 ms before (too far); out 10000-10200, woken
  // at 10100 by 100; out 10300-11000, no wake of its own (10100's ended the span before).
  std::vector<recorder::Waking> w = {wake(1500000, 100, 100, 101), wake(3000000, 100, 100, 101),
                                     wake(4500000, 100, 100, 101), wake(10100000, 100, 100, 101)};
  builder.on_wakings(w);
  std::vector<Rec> recs = {switch_at(100, 101, 1000000, true),  switch_at(100, 101, 2000000, false),
                           switch_at(100, 101, 3010000, true),  switch_at(100, 101, 4000000, false),
                           switch_at(100, 101, 6000000, true),  switch_at(100, 101, 7000000, false),
                           switch_at(100, 101, 10000000, true), switch_at(100, 101, 10200000, false),
                           switch_at(100, 101, 10300000, true), switch_at(100, 101, 11000000, false)};
  test::Records src;
  for (Rec& r : recs) src.add(r);
  REQUIRE(recorder::feed_round(src, builder) == recs.size());
  builder.on_end(12000000);

  const model::Thread& t = profile.processes.at(0).threads.at(1);
  REQUIRE(t.tid == 101);
  const std::string waker = profile.processes[0].threads[0].name + " 100";
  std::vector<std::string> seen;
  for (const model::Marker& m : t.markers)
    seen.push_back(std::string(profile.strings.get(m.name)) + " " + std::to_string(m.start_ns / 1000) + "-" +
                   std::to_string(m.end_ns / 1000) + " " + field(profile, m, "waker"));
  CHECK(seen == std::vector<std::string>{"Blocked 1000-1500 " + waker, "Preempted 1500-2000 (none)",
                                         "Blocked 3010-4000 " + waker, "Blocked 6000-7000 (none)",
                                         "Blocked 10000-10100 " + waker, "Preempted 10100-10200 (none)",
                                         "Blocked 10300-11000 (none)"});
}
