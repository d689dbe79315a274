// model::CounterSeries (model/counters.h): the one writer of every counter track, drawn by the Firefox
// Profiler as straight lines between samples, up to the last one.
#include "model/counters.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

using namespace fxprof::model;

namespace {
constexpr uint64_t ms = 1000000;
std::vector<std::pair<uint64_t, int64_t>> points(const std::vector<CounterSample>& s) {
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (const CounterSample& c : s) out.emplace_back(c.time_ns / ms, c.delta);
  return out;
}
}  // namespace

TEST_CASE("counters: a level holds until just before it changes, and to the process's end", "[model]") {
  // RSS read every 10 ms: 5 MB at 0, unchanged until 300, 55 MB at 310, back to 5 at 2410, exit at 5000.
  CounterSeries s(CounterSeries::Graph::Level);
  s.read(0, 5);
  for (uint64_t t = 10; t <= 300; t += 10) s.read(t * ms, 0);
  s.read(310 * ms, 50);
  for (uint64_t t = 320; t <= 2400; t += 10) s.read(t * ms, 0);
  s.read(2410 * ms, -50);
  for (uint64_t t = 2420; t <= 2500; t += 10) s.read(t * ms, 0);
  CHECK(points(s.finish(5000 * ms)) == std::vector<std::pair<uint64_t, int64_t>>{
                                           {0, 5}, {300, 0}, {310, 50}, {2400, 0}, {2410, -50}, {5000, 0}});
}

TEST_CASE("counters: a rate is zero from the read after a change, and a lone change is one interval wide",
          "[model]") {
  // One major fault between the reads at 360 and 370 of a 5 s process; nothing else.
  CounterSeries s(CounterSeries::Graph::Rate);
  for (uint64_t t = 0; t <= 360; t += 10) s.read(t * ms, 0);
  s.read(370 * ms, 1, 1);
  for (uint64_t t = 380; t <= 1000; t += 10) s.read(t * ms, 0);
  CHECK(points(s.finish(5000 * ms)) ==
        std::vector<std::pair<uint64_t, int64_t>>{{0, 0}, {360, 0}, {370, 1}, {380, 0}, {5000, 0}});
}

TEST_CASE("counters: the last read is kept when the process's end is unknown", "[model]") {
  CounterSeries s(CounterSeries::Graph::Level);
  s.read(10 * ms, 7);
  s.read(20 * ms, 0);
  s.read(30 * ms, 0);
  CHECK(points(s.finish(0)) == std::vector<std::pair<uint64_t, int64_t>>{{10, 7}, {30, 0}});
  // A hold within `resolution` of the previous sample is left out (the heap's 1 ms buckets).
  CounterSeries h(CounterSeries::Graph::Level, ms);
  h.read(1 * ms, 4);
  h.read(2 * ms - 1, 0);
  h.read(2 * ms, 4);
  h.read(9 * ms - 1, 0);
  h.read(9 * ms, -8);
  auto got = h.finish(9 * ms);
  REQUIRE(got.size() == 4);
  CHECK(got[2].time_ns == 9 * ms - 1);
  CHECK(got[2].delta == 0);
}

TEST_CASE("counters: every counter ends where its process does, or the recording", "[model]") {
  Profile p;
  p.meta.end_monotonic_ns = 900;
  Process running, exited;
  exited.end_ns = 500;
  CHECK(counter_end(p, running, 1) == 900);
  CHECK(counter_end(p, exited, 1) == 500);
  p.meta.end_monotonic_ns.reset();
  CHECK(counter_end(p, running, 1) == 1);
}
