// The builder's off-CPU spans (builder_offcpu.cpp): switch records, synthetic, through the RecordSource
// boundary (tests/recorder/synthetic.h), with a /proc that knows nothing: no perf, no root, no timing.
#include <catch2/catch.hpp>
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
  std::vector<recorder::RecordRef> refs;
  recorder::feed_round(src, builder, refs);
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
