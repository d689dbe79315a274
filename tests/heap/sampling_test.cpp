// --heap=sampled's estimates against the exact figures of --heap=full on the same deterministic program, over
// many runs with fixed seeds (FXPROF_HEAP_SEED): the recorder's side (heap::HeapSource) and the report's
// figures (sinks/heap_report.h, what `report --heap --json` prints), without perf, so that a run costs a
// few milliseconds.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "heap/heap.h"
#include "sinks/heap_report.h"
#include "tests/support/support.h"

namespace fxprof::test {
namespace {

struct Run {
  sinks::HeapReport report;
  int64_t curve_max = 0;                         // the highest point of the Heap counter (the in-use curve)
  std::map<int64_t, uint64_t> leaked_by_weight;  // bytes per block of the leaked rows -> blocks
};

Run heap_run(heap::Mode mode, double rate, const std::vector<std::string>& argv, uint64_t seed) {
  heap::Options o;
  o.mode = mode;
  o.rate_bytes = rate;
  std::string bin = fxprof_bin();
  o.shim_path = bin.substr(0, bin.rfind('/')) + "/libfxprof_heap.so";
  auto source = heap::HeapSource::start(o);
  REQUIRE(source);
  CmdOptions c;
  c.env["FXPROF_HEAP_SEED"] = std::to_string(seed);
  auto r = run(argv, c);
  INFO(r.err);
  REQUIRE(r.status == 0);
  model::Profile profile;
  (*source)->finish(profile);
  Run out;
  out.report = sinks::make_heap_report(profile, 10);
  for (const model::Process& p : profile.processes) {
    for (const model::Counter& k : p.counters) {
      int64_t v = 0;
      for (const auto& s : k.samples) out.curve_max = std::max(out.curve_max, v += s.delta);
    }
    for (const model::Thread& t : p.threads) {
      std::map<uint64_t, int64_t> live;
      std::map<uint64_t, uint64_t> counts;
      for (const model::Allocation& a : t.allocations) {
        if (a.bytes > 0)
          live[a.address] = a.bytes, counts[a.address] = a.count;
        else
          live.erase(a.address);
      }
      for (auto& [tag, bytes] : live) out.leaked_by_weight[bytes / int64_t(counts[tag])] += counts[tag];
    }
  }
  return out;
}

TEST_CASE("heap sampled: estimates within their 95% bars and unbiased against full mode, no phantom leak",
          "[heap]") {
  const std::vector<std::string> argv{test_program("heap_prog"), "estimate"};
  const Run full = heap_run(heap::Mode::Full, 0, argv, 0);
  const auto& truth = full.report;
  // The program's own figures (and the C++ runtime's few blocks before main).
  CHECK(truth.leaked_bytes >= 1000000);
  CHECK(truth.leaked_bytes < 1000000 + 100000);
  CHECK(truth.peak_bytes >= 3600000);
  CHECK(truth.temporary >= 20000);
  constexpr double kRate = 16384;
  constexpr int kRuns = 24;
  // A leaked 1000-byte block stands for 1000 / (1 - exp(-1000/16384)) bytes; nothing else may be left over.
  const int64_t w1000 = std::llround(1000 / -std::expm1(-1000 / kRate));
  struct Figure {
    const char* name;
    int64_t truth;
    int within = 0;
    double sum = 0;
    double bar_sum = 0;
  };
  Figure peak{"peak", truth.peak_bytes}, leak{"leak", truth.leaked_bytes},
      allocated{"allocated", truth.bytes_allocated}, temporary{"temporary", int64_t(truth.temporary)};
  double curve_max_sum = 0;
  auto check = [](Figure& f, int64_t estimate, int64_t bar) {
    f.within += std::abs(estimate - f.truth) <= bar;
    f.sum += double(estimate);
    f.bar_sum += double(bar);
  };
  for (int seed = 1; seed <= kRuns; ++seed) {
    const Run s = heap_run(heap::Mode::Sampled, kRate, argv, uint64_t(seed));
    const auto& r = s.report;
    REQUIRE(r.sampled);
    INFO("seed " << seed);
    auto bar = [&](int64_t t) {
      return int64_t(1.96 * std::sqrt((double(std::max<int64_t>(t, 0)) + kRate) * kRate));
    };
    check(peak, r.peak_bytes, bar(r.peak_bytes));
    check(leak, r.leaked_bytes, bar(r.leaked_bytes));
    check(allocated, r.bytes_allocated, bar(r.bytes_allocated));
    check(temporary, int64_t(r.temporary), int64_t(std::llround(1.96 * double(r.temporary_error))));
    curve_max_sum += double(s.curve_max);
    // No phantom leak: every block still allocated is one of the leaked 1000-byte ones (a sampled block
    // whose free went unseen would be a 1200-byte or 100-byte one).
    for (auto& [weight, blocks] : s.leaked_by_weight)
      if (weight != w1000 && weight < 70000)
        CHECK(weight == w1000);  // (and the C++ runtime's 72704-byte pool)
  }
  for (Figure* f : {&peak, &leak, &allocated, &temporary}) {
    INFO(f->name << ": truth " << f->truth << ", mean " << f->sum / kRuns << ", mean bar "
                 << f->bar_sum / kRuns << ", within " << f->within << "/" << kRuns);
    CHECK(f->within >= kRuns * 8 / 10);  // 95% bars: 15.2 of 16 expected
    // Unbiased: the mean of the runs within 3 standard errors of the mean (bar / 1.96 / sqrt(runs)).
    CHECK(std::abs(f->sum / kRuns - double(f->truth)) <= 3 * (f->bar_sum / kRuns) / 1.96 / std::sqrt(kRuns));
  }
  // What the peak was before: the in-use curve's highest point, the highest of its noise too.
  INFO("curve max mean " << curve_max_sum / kRuns);
  CHECK(curve_max_sum / kRuns > double(truth.peak_bytes) * 1.05);
}

TEST_CASE("heap sampled: a peak held by fewer than 64 samples gets a wide 95% interval that covers the truth",
          "[heap]") {
  // heap_prog estimate's plateau (3,600,000 bytes in 3000 blocks, each replaced 10 times) at one sample per
  // 120,000 bytes: 37-54 samples hold the peak, whose estimate is then the curve's plain highest point.
  const std::vector<std::string> argv{test_program("heap_prog"), "estimate"};
  const int64_t truth = heap_run(heap::Mode::Full, 0, argv, 0).report.peak_bytes;
  constexpr double kRate = 120000;
  constexpr int kRuns = 20;
  int covered = 0, old_covered = 0;
  for (int seed = 1; seed <= kRuns; ++seed) {
    const sinks::HeapReport r = heap_run(heap::Mode::Sampled, kRate, argv, uint64_t(seed)).report;
    INFO("seed " << seed << ": peak " << r.peak_bytes << " [" << r.peak_low << ", " << r.peak_high
                 << "] from " << r.peak_samples << " samples; truth " << truth);
    REQUIRE(r.peak_samples > 0);
    REQUIRE(r.peak_samples < 64);
    CHECK(r.peak_low <= r.peak_bytes);
    CHECK(r.peak_high >= r.peak_bytes);
    covered += r.peak_low <= truth && truth <= r.peak_high;
    const double bar = 1.96 * std::sqrt((double(r.peak_bytes) + kRate) * kRate);  // the +- printed before
    old_covered += std::abs(double(r.peak_bytes - truth)) <= bar;
    // Printed as its interval, not as a number alone (nor as a symmetric +-).
    const std::string text = sinks::format_heap_report(r);
    CHECK(text.find("95% interval") != std::string::npos);
    CHECK(text.find("samples held it)") != std::string::npos);
  }
  // A 95% interval covers the truth in X of 20 independent runs, X ~ Binomial(20, 0.95): P(X <= 15) = 0.26%
  // (P(X <= 16) = 1.6%), so a right interval fails this check for about one seed set in 400 (the seeds are
  // fixed: it passes or fails the same way every time). The +- printed before covered it in 8 of 20.
  INFO("covered " << covered << "/" << kRuns << ", the symmetric +- " << old_covered << "/" << kRuns);
  CHECK(covered >= 16);
}

TEST_CASE("heap sampled: a heap over several bitmap turns leaks nothing when everything is freed", "[heap]") {
  // 65k blocks of 96 bytes spread over 270 MB of heap (two turns of the sampled-address bitmap), a third of
  // them sampled, freed in a scrambled order: unsampled blocks share bits with sampled ones of the other
  // turn; their frees once cleared those bits and the sampled blocks' own frees went unseen (with the bitmap
  // alone: 77 KB, 1.6 MB and 343 KB leaked in three runs here; 0.6-5.5 MiB on python).
  const Run s = heap_run(heap::Mode::Sampled, 256, {test_program("heap_prog"), "spread", "4096"}, 7);
  INFO("allocations " << s.report.allocations << ", frees " << s.report.frees);
  CHECK(s.report.allocations > 20000);
  CHECK(s.report.frees > 20000);
  // Only the C++ runtime's blocks from before main may be left, none of the program's 96-byte ones.
  CHECK(s.leaked_by_weight.count(std::llround(96 / -std::expm1(-96 / 256.0))) == 0);
  CHECK(s.report.leaked_bytes < 100000);
}

}  // namespace
}  // namespace fxprof::test
