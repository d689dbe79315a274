// recorder/losses.h, the builder's losses tracker: synthetic records through the RecordSource boundary
// (tests/recorder/synthetic.h) into a ProfileBuilder; no perf, no root.
#include "recorder/losses.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/builder.h"
#include "tests/recorder/synthetic.h"

using namespace fxprof;
using test::Rec;
using test::sample_start;

namespace {

const uint64_t kUser = static_cast<uint64_t>(PERF_CONTEXT_USER);

Rec lost(uint32_t pid, uint32_t tid, uint64_t time, uint64_t n) {
  Rec r(PERF_RECORD_LOST);
  r.u64(1).u64(n).trailer(pid, tid, time);
  return r;
}

std::string root_name(const model::Profile& p, model::StackId s) {
  while (p.stacks.prefix(s) != model::kNoStack) s = p.stacks.prefix(s);
  const model::Frame& f = p.frames.get(p.stacks.frame(s));
  return f.name == model::kNoString ? "" : std::string(p.strings.get(f.name));
}

}  // namespace

TEST_CASE("losses: lost records become markers on the thread that lost them, throttles are counted",
          "[recorder]") {
  model::Profile profile;
  recorder::EventConfig events;
  recorder::ProfileBuilder builder(profile, nullptr, events, recorder::live_procfs());
  builder.on_launched(100, "prog", 0);
  builder.on_attached_thread(100, 101, 0);
  test::Records src;
  Rec a = lost(100, 101, 20, 17), b = lost(0, 0, 30, 3);  // the second names no thread: the first one's
  Rec t(PERF_RECORD_THROTTLE);
  t.u64(25).u64(1).trailer(100, 101, 25);
  src.add(a);
  src.add(t);
  src.add(b);
  REQUIRE(recorder::feed_round(src, builder) == 3);
  CHECK(builder.lost() == 20);
  CHECK(builder.throttled() == 1);
  REQUIRE(profile.processes.size() == 1);
  const auto& threads = profile.processes[0].threads;
  REQUIRE(threads.size() == 2);
  REQUIRE(threads[1].markers.size() == 1);
  CHECK(profile.strings.get(threads[1].markers[0].name) == "Lost records");
  CHECK(threads[1].markers[0].start_ns == 20);
  CHECK(threads[1].markers[0].fields.at(0).number == 17);
  REQUIRE(threads[0].markers.size() == 1);
  CHECK(threads[0].markers[0].fields.at(0).number == 3);
  CHECK(profile.meta.marker_schemas.size() == 1);  // one schema, however many losses
}

TEST_CASE("losses: after a loss, a sample in code no known mapping covers is marked, never guessed",
          "[recorder]") {
  model::Profile profile;
  recorder::EventConfig events;
  recorder::ProfileBuilder builder(profile, nullptr, events, recorder::live_procfs());
  builder.on_launched(100, "prog", 0);
  test::Records src;
  Rec before = sample_start(100, 100, 10, {kUser, 0x401000});
  Rec l = lost(100, 100, 20, 5);
  Rec after = sample_start(100, 100, 30, {kUser, 0x401000});
  src.add(before);
  src.add(l);
  src.add(after);
  recorder::feed_round(src, builder);
  const auto& samples = profile.processes.at(0).threads.at(0).samples;
  REQUIRE(samples.size() == 2);
  CHECK(root_name(profile, samples[0].stack).empty());  // no loss yet: the address itself
  CHECK(root_name(profile, samples[1].stack) == "(unknown code: records lost)");
  CHECK(builder.unknown_code_samples() == 1);
  CHECK(builder.unknown_code_processes() == 1);
}
