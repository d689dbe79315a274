// model/latency.h on hand-made profiles: a serial stretch keeps every sample, a stretch of k threads every
// k-th of each, off-CPU samples stay.
#include "model/latency.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace fxprof::model;

namespace {

constexpr uint64_t ms = 1'000'000;

}  // namespace

TEST_CASE("latency: samples weigh 1/(threads running at their moment)", "[model][latency]") {
  Profile p;
  const StackId serial = p.stacks.intern_path(std::vector<FrameId>{p.label_frame("serial", Category::User)});
  const StackId par = p.stacks.intern_path(std::vector<FrameId>{p.label_frame("parallel", Category::User)});
  const StackId idle = p.stacks.intern_path(std::vector<FrameId>{p.label_frame("[blocked]", Category::Idle)});
  Process& proc = p.processes.emplace_back();
  proc.threads.resize(4);
  // 100 ms of one thread, then 100 ms of three at once (their samples a little apart, as real ones are).
  for (uint64_t t = 1; t <= 100; ++t) proc.threads[0].samples.push_back({t * ms, serial, int32_t(ms)});
  for (size_t i = 1; i <= 3; ++i) {
    for (uint64_t t = 101; t <= 200; ++t)
      proc.threads[i].samples.push_back({t * ms + i * 100'000, par, int32_t(ms)});
    proc.threads[i].samples.push_back({50 * ms, idle, -1});  // waiting meanwhile: not running
  }
  const LatencyStats st = keep_latency_samples(p);
  CHECK(st.on_cpu == 400);
  CHECK(proc.threads[0].samples.size() == 100);
  for (size_t i = 1; i <= 3; ++i) {
    CHECK(proc.threads[i].samples.size() >= 33 + 1);  // a third of its 100, and the off-CPU sample
    CHECK(proc.threads[i].samples.size() <= 34 + 1);
    CHECK(proc.threads[i].samples.back().stack == idle);
  }
  CHECK(st.kept >= 199);
  CHECK(st.kept <= 202);
}
