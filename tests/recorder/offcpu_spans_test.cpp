// The off-CPU spans tracker (recorder/offcpu_spans.h): switch records, synthetic, through the builder and the
// RecordSource boundary (tests/recorder/synthetic.h), and typed records given to the tracker alone with its
// context's services faked, with a /proc that knows nothing: no perf, no root, no timing.
#include "recorder/offcpu_spans.h"

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/builder.h"
#include "tests/recorder/synthetic.h"

using namespace fxprof;
using test::Rec;

namespace {

Rec switch_record(uint32_t pid, uint32_t tid, uint64_t time, bool out, bool preempted = false) {
  uint16_t misc = out ? PERF_RECORD_MISC_SWITCH_OUT : 0;
  if (preempted) misc |= PERF_RECORD_MISC_SWITCH_OUT_PREEMPT;
  Rec r(PERF_RECORD_SWITCH, misc);
  r.trailer(pid, tid, time);
  return r;
}

}  // namespace

TEST_CASE("off-CPU spans: a wait above the threshold is a marker, one below is none", "[recorder]") {
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  recorder::OffCpuConfig oc;
  oc.spans = true;
  oc.threshold_ns = 1000000;
  builder.set_off_cpu(oc);
  builder.on_launched(100, "prog", 0);
  std::vector<Rec> recs;
  recs.push_back(switch_record(100, 100, 1000000, true));  // blocked 4 ms
  recs.push_back(switch_record(100, 100, 5000000, false));
  recs.push_back(switch_record(100, 100, 6000000, true, true));  // preempted 3 ms
  recs.push_back(switch_record(100, 100, 9000000, false));
  recs.push_back(switch_record(100, 100, 9100000, true));  // 0.5 ms: no marker
  recs.push_back(switch_record(100, 100, 9600000, false));
  recs.push_back(switch_record(100, 100, 10000000, true));  // still out at the end
  test::Records src;
  for (Rec& r : recs) src.add(r);
  recorder::feed_round(src, builder);
  builder.on_end(12000000);

  CHECK(builder.off_cpu_spans() == 4);
  const auto& markers = profile.processes.at(0).threads.at(0).markers;
  REQUIRE(markers.size() == 3);
  auto name = [&](const model::Marker& m) { return std::string(profile.strings.get(m.name)); };
  CHECK(name(markers[0]) == "Blocked");
  CHECK((markers[0].start_ns == 1000000 && markers[0].end_ns == 5000000));
  CHECK(profile.strings.get(markers[0].fields.at(0).string) == "unknown (no stack)");
  CHECK(name(markers[1]) == "Preempted");
  CHECK((markers[1].start_ns == 6000000 && markers[1].end_ns == 9000000));
  CHECK(name(markers[2]) == "Blocked");  // closed at the end of the recording
  CHECK((markers[2].start_ns == 10000000 && markers[2].end_ns == 12000000));
}

namespace {

// The off-CPU spans tracker on its own: a context with one thread and an unwind-this-sample service that
// counts its calls (no builder, no unwinder).
struct Fixture {
  model::Profile profile;
  test::NoProcfs procfs;
  model::Thread thread;
  int unwound = 0;
  recorder::TrackerContext context{
      profile,
      procfs,
      [this](uint32_t tid) { return tid == 7 ? &thread : nullptr; },
      [](const std::function<void(uint32_t)>& f) { f(7); },
      [](uint32_t) -> model::Process* { return nullptr; },
      [](const std::function<void(uint32_t)>&) {},
      [this](const recorder::SampleRecord&) -> std::optional<model::StackId> {
        ++unwound;
        return profile.stacks.intern_path(std::vector<model::FrameId>{profile.native_frame(0x1234)});
      },
      {},
      nullptr,
      false,
      {}};
  recorder::OffCpuTracker tracker{context};

  Fixture() {
    thread.tid = 7;
    recorder::OffCpuConfig oc;
    oc.spans = oc.stacks = true;
    oc.interval_ns = oc.threshold_ns = 1000000;
    tracker.set_off_cpu(oc);
  }
  // A switch-out at `out` with its context-switches sample, and the switch-in at `in` (none when 0).
  void wait(uint64_t out, uint64_t in) {
    recorder::SampleRecord s;
    s.pid = s.tid = 7;
    s.time = out;
    s.switch_event = s.ok = true;
    tracker.on_sample(s);
    tracker.on_switch({7, 7, out, true, false});
    if (in) tracker.on_switch({7, 7, in, false, false});
  }
};

}  // namespace

TEST_CASE("off-CPU spans tracker: a switch-out's stack is unwound only for a span that needs it",
          "[recorder]") {
  Fixture f;
  f.wait(1000000, 1200000);  // 0.2 ms: no sample, no marker, no unwinding
  CHECK(f.unwound == 0);
  f.wait(2000000, 5000000);  // 3 ms: three samples and a marker, with the unwound stack
  CHECK(f.unwound == 1);
  CHECK(f.context.counts.switch_samples == 2);
  CHECK(f.context.counts.switch_stacks_unwound == 1);
  CHECK(f.context.counts.off_cpu_spans == 2);
  CHECK(f.context.counts.off_cpu_samples == 3);
  REQUIRE(f.thread.samples.size() == 3);
  REQUIRE(f.thread.markers.size() == 1);
  CHECK(f.profile.stacks.prefix(f.thread.samples[0].stack) == f.thread.markers[0].stack);
  CHECK(f.profile.frames.get(f.profile.stacks.frame(f.thread.markers[0].stack)).address == 0x1234);
  CHECK(f.profile.strings.get(f.thread.markers[0].fields.at(0).string) == "(pending)");  // named at the end
}

TEST_CASE(
    "off-CPU spans tracker: a wait still open is unwound at the round's end, not at an exit; "
    "a forgotten thread's wait is gone",
    "[recorder]") {
  Fixture f;
  f.wait(1000000, 0);
  CHECK(f.context.out_since(7) == std::optional<uint64_t>(1000000));
  f.tracker.release(99, 1500000, recorder::Release::Exit);  // another process's exit: not now
  CHECK(f.unwound == 0);
  f.tracker.release(0, 0, recorder::Release::Round);  // its record is released next: now
  CHECK(f.unwound == 1);
  f.tracker.release(0, 0, recorder::Release::Round);  // once
  CHECK(f.unwound == 1);
  f.tracker.on_end(4000000);  // closed at the end: 3 ms, the stack already unwound
  CHECK(f.unwound == 1);
  CHECK(f.thread.markers.size() == 1);
  CHECK(!f.context.out_since(7));

  Fixture g;
  g.wait(1000000, 0);
  g.tracker.forget_thread(7);  // it exited: its wait and its pending stack go with it
  CHECK(!g.context.out_since(7));
  g.tracker.release(0, 0, recorder::Release::Round);
  g.tracker.on_end(4000000);
  CHECK(g.unwound == 0);
  CHECK(g.thread.markers.empty());
}
