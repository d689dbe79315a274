#include "counters/cachesim.h"

#include <catch2/catch.hpp>

using namespace fxprof::counters;

TEST_CASE("Cachegrind's output: totals from the summary, per-function sums over their lines") {
  const std::string text =
      "desc: I1 cache:         32768 B, 64 B, 8-way associative\n"
      "desc: D1 cache:         32768 B, 64 B, 8-way associative\n"
      "desc: LL cache:         8388608 B, 64 B, 16-way associative\n"
      "cmd: ./a.out\n"
      "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\n"
      "fl=/src/a.cpp\n"
      "fn=walk(long)\n"
      "10 100 1 1 50 40 30 10 0 0\n"
      "11 100 0 0 50 10 10\n"
      "fn=main\n"
      "20 10 2 2 5 0 0 5 1 1\n"
      "fl=/src/b.cpp\n"
      "fn=walk(long)\n"
      "3 1 0 0 1 1 1\n"
      "summary: 211 3 3 106 51 41 15 1 1\n";
  auto r = parse_cachegrind(text);
  REQUIRE(r);
  CHECK(r->caches.size() == 3);
  CHECK(r->caches[2] == "LL cache: 8388608 B, 64 B, 16-way associative");
  CHECK(r->total.ir == 211);
  CHECK(r->total.d1_misses() == 52);
  CHECK(r->total.ll_misses() == 3 + 41 + 1);
  // walk's lines in b.cpp (inlined code) count in walk, whose file is where most of its instructions are.
  REQUIRE(r->functions.size() == 2);
  const auto& walk = r->functions[1].name == "walk(long)" ? r->functions[1] : r->functions[0];
  CHECK(walk.name == "walk(long)");
  CHECK(walk.file == "/src/a.cpp");
  CHECK(walk.counts.d1_misses() == 51);
  CHECK(walk.counts.ir == 201);
  const std::string report = format_cache_sim(*r, 2);
  CHECK(report.find("Simulated caches (Cachegrind, not hardware counters") != std::string::npos);
  CHECK(report.find("Top functions by D1 misses (simulated):") != std::string::npos);
  CHECK(report.find("walk(long) (/src/a.cpp)") != std::string::npos);

  auto none = parse_cachegrind("events: Ir\nfl=x\nfn=y\n1 5\n");
  REQUIRE(!none);
  CHECK(none.error() == "Cachegrind ran without its cache simulation (no D1mr events)");
  CHECK(parse_cachegrind("garbage").error() == "not a Cachegrind output file (no events line)");
}
