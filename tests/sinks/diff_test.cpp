// Comparing two profiles: shares normalised by each profile's samples, biggest change first with its sign,
// the differential flame graph coloured by change.
#include "sinks/diff.h"

#include <catch2/catch.hpp>

#include "tests/sinks/sink_models.h"
#include "tests/support/support.h"

using namespace fxprof;

namespace {

// sink_profile with `extra` more samples of main;helper in the app thread.
model::Profile slower_helper(int extra) {
  model::Profile p = test::sink_profile();
  std::vector<model::FrameId> path{p.label_frame("main", model::Category::User),
                                   p.label_frame("helper", model::Category::User)};
  auto s = p.stacks.intern_path(path);
  for (int i = 0; i < extra; ++i)
    p.processes[0].threads[0].samples.push_back({test::kSinkT0 + 99'000'000, s, 1});
  return p;
}

}  // namespace

TEST_CASE("diff ranks the function that grew first, with a positive change") {
  auto d = sinks::diff_profiles(test::sink_profile(), slower_helper(20));
  CHECK(d.base_samples == 20);
  CHECK(d.new_samples == 40);
  REQUIRE(d.rows.size() >= 3);
  CHECK(d.rows[0].name == "helper");
  CHECK(d.rows[0].base_self == Approx(25.0));
  CHECK(d.rows[0].new_self == Approx(62.5));  // 25 of 40
  CHECK(d.rows[0].self_change() == Approx(37.5));
  CHECK(d.rows[1].name == "compute");  // 50% -> 25%
  CHECK(d.rows[1].self_change() == Approx(-25.0));
  std::string table = sinks::format_diff(d, 2);
  INFO(table);
  CHECK(table.find("25.00%  62.50%  +37.50%") != std::string::npos);
  CHECK(table.find("compute") != std::string::npos);
  CHECK(table.find("rec") == std::string::npos);  // limit 2
}

TEST_CASE("the same profile twice changes nothing") {
  auto d = sinks::diff_profiles(test::sink_profile(), test::sink_profile());
  for (const auto& r : d.rows) {
    CHECK(r.self_change() == Approx(0));
    CHECK(r.total_change() == Approx(0));
  }
}

TEST_CASE("differential flame graph: widths from NEW, red where the share grew") {
  test::TempDir dir;
  sinks::SvgOptions o;
  o.min_width = 0;
  REQUIRE(sinks::write_diff_svg(test::sink_profile(), slower_helper(20), dir.file("d.svg"), o));
  CHECK(test::run({"xmllint", "--noout", dir.file("d.svg")}).status == 0);
  std::string svg = test::read_profile_text(dir.file("d.svg"));
  CHECK(svg.find("Differential Flame Graph") != std::string::npos);
  CHECK(svg.find("data-total=\"40\"") != std::string::npos);
  // main;helper grew from 10% to 55%: the most grown box is full red.
  CHECK(svg.find("data-n=\"helper\" data-s=\"22\"") != std::string::npos);
  CHECK(svg.find("data-fill=\"rgb(255,55,55)\" data-extra=\", +45.00% of samples vs base\"") !=
        std::string::npos);
}

TEST_CASE("the diff table prints function names with control characters escaped") {
  model::Profile next = test::sink_profile();
  std::vector<model::FrameId> path{next.label_frame("main", model::Category::User),
                                   next.label_frame("\x1b[2Jclear", model::Category::User)};
  auto s = next.stacks.intern_path(path);
  for (int i = 0; i < 20; ++i)
    next.processes[0].threads[0].samples.push_back({test::kSinkT0 + 99'000'000, s, 1});
  const std::string table = sinks::format_diff(sinks::diff_profiles(test::sink_profile(), next), 10);
  INFO(table);
  CHECK(table.find('\x1b') == std::string::npos);
  CHECK(table.find("\\e[2Jclear\n") != std::string::npos);
}

namespace {

// sink_profile with `n` off-CPU samples ([preempted] or [blocked: futex] under main) in the app thread.
model::Profile with_off_cpu(model::Profile p, const char* reason, int n) {
  std::vector<model::FrameId> path{p.label_frame("main", model::Category::User),
                                   p.label_frame(reason, model::Category::Idle)};
  auto s = p.stacks.intern_path(path);
  for (int i = 0; i < n; ++i) p.processes[0].threads[0].samples.push_back({test::kSinkT0 + 99'000'000, s, 0});
  return p;
}

}  // namespace

TEST_CASE("diff compares on-CPU samples: [preempted] never counts, blocked time only with --wall") {
  // The same code, the second run on a busier machine: 60 more samples [preempted], 20 [blocked: futex].
  const model::Profile busy =
      with_off_cpu(with_off_cpu(test::sink_profile(), "[preempted]", 60), "[blocked: futex]", 20);
  auto cpu = sinks::diff_profiles(test::sink_profile(), busy);
  CHECK(cpu.new_samples == 20);
  for (const auto& r : cpu.rows) {
    INFO(r.name);
    CHECK(r.self_change() == Approx(0));
    CHECK(r.name != "[preempted]");
  }
  CHECK(sinks::gate_failures(cpu, 5, "").empty());
  // --wall (Program): blocked samples count, preempted ones never.
  auto wall = sinks::diff_profiles(test::sink_profile(), busy, true, sinks::Clock::Wall);
  CHECK(wall.clock == sinks::Clock::Program);
  CHECK(wall.new_samples == 40);
  bool blocked = false;
  for (const auto& r : wall.rows) {
    CHECK(r.name != "[preempted]");
    blocked |= r.name == "[blocked: futex]" && r.new_self == Approx(50.0);
  }
  CHECK(blocked);
}

TEST_CASE("the gate: a change must exceed the limit beyond its sampling error, even with one run a side") {
  // helper: 25% of 20 samples -> 62.5% of 40: +37.5 points; the 95% interval of that change on so few
  // samples is about +-23 points: over a limit of 10, not beyond it by the error.
  auto d = sinks::diff_profiles(test::sink_profile(), slower_helper(20));
  REQUIRE(d.rows[0].name == "helper");
  CHECK(d.rows[0].self_noise() == 0);  // one run a side: no spread
  CHECK(d.rows[0].self_margin > 20);
  CHECK(d.rows[0].self_margin < 30);
  CHECK(sinks::gate_failures(d, 20, "").empty());  // 37.5 < 20 + ~23
  CHECK(sinks::gate_failures(d, 20, "helper").empty());
  // The same shares on 100x the samples: an error of ~2.5 points, and the gate fails.
  std::vector<model::Profile> base(1, test::sink_profile()), next(1, slower_helper(20));
  for (auto* side : {&base, &next})
    for (model::Process& proc : (*side)[0].processes)
      for (model::Thread& th : proc.threads) {
        const auto samples = th.samples;
        for (int k = 1; k < 100; ++k) th.samples.insert(th.samples.end(), samples.begin(), samples.end());
      }
  auto many = sinks::diff_runs(base, next);
  REQUIRE(many.rows[0].name == "helper");
  CHECK(many.rows[0].self_change() == Approx(37.5));
  CHECK(many.rows[0].self_margin < 4);
  REQUIRE(sinks::gate_failures(many, 20, "").size() == 1);
  CHECK(sinks::gate_failures(many, 20, "")[0]->name == "helper");
  CHECK(sinks::format_diff(many, 5).find("records lost") == std::string::npos);

  // Records lost beside NEW's samples: each could have been a sample of any function, so the change is
  // only known to within their share. 4000 samples and 4000 lost: NEW's shares can be off by 50 points.
  const uint64_t new_samples = many.new_samples;
  next[0].meta.data_quality.push_back({"x", 7});  // another problem: not a loss
  next[0].meta.data_quality.push_back(
      {std::string(model::Meta::kLostRecordsLabel), new_samples, model::Meta::ProblemKind::LostRecords});
  CHECK(next[0].meta.lost_records() == new_samples);
  auto lossy = sinks::diff_runs(base, next);
  REQUIRE(lossy.rows[0].name == "helper");
  CHECK(lossy.new_lost == new_samples);
  CHECK(lossy.new_lost_bound == Approx(50.0));
  CHECK(lossy.rows[0].self_margin == Approx(many.rows[0].self_margin + 50.0));
  CHECK(sinks::gate_failures(lossy, 20, "").empty());  // 37.5 < 20 + ~2.5 + 50: cannot be told
  const std::string table = sinks::format_diff(lossy, 5);
  INFO(table);
  CHECK(table.find("records lost (ring buffer overflow): base 0, new " + std::to_string(new_samples) +
                   ": their shares can be off by up to 0.00 and 50.00 points") != std::string::npos);
  CHECK(sinks::format_diff_markdown(lossy, 5, "").find("records lost") != std::string::npos);
}

TEST_CASE("the gate's --function matches a signature written in full or bare") {
  CHECK(sinks::function_matches("app::hash_block(char const*, unsigned long)", "hash_block"));
  CHECK(sinks::function_matches("app::hash_block(char const*, unsigned long)", "app::hash_block"));
  CHECK(sinks::function_matches("app::hash_block(char const*, unsigned long)",
                                "app::hash_block(char const*, unsigned long)"));
  CHECK(sinks::function_matches("demo::hash_block", "hash_block"));
  CHECK(
      sinks::function_matches("std::vector<int, std::allocator<int> >::push_back(int const&)", "push_back"));
  CHECK(sinks::function_matches("sort_all<std::pair<int, int> >(int)", "sort_all"));
  CHECK(sinks::function_matches("beta(long)", "beta"));
  CHECK_FALSE(sinks::function_matches("app::hash_block_fast(char const*)", "hash_block"));
  CHECK_FALSE(sinks::function_matches("hash_block", ""));
}
