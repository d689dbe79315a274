// The report: per-process and per-thread sections, top functions by self and total, lost records and
// truncated stacks, the call tree, the JSON form, the summary line after recording.
#include "sinks/report.h"

#include <catch2/catch.hpp>

#include "tests/sinks/sink_models.h"
#include "tests/support/support.h"

using namespace fxprof;

namespace {

model::Profile with_losses() {
  model::Profile p = test::sink_profile();
  model::Marker m;
  m.name = p.strings.intern("Lost records");
  m.fields.push_back({p.strings.intern("count"), false, 7, model::kNoString});
  p.processes[0].threads[0].markers.push_back(m);
  std::vector<model::FrameId> trunc{p.label_frame("(stack truncated)"),
                                    p.label_frame("compute", model::Category::User)};
  auto s = p.stacks.intern_path(trunc);
  p.processes[0].threads[0].samples.push_back({test::kSinkT0 + 90'000'000, s, 1'000'000});
  return p;
}

}  // namespace

TEST_CASE("report per process: top functions, totals, losses") {
  sinks::ReportOptions o;
  auto r = sinks::make_report(with_losses(), o);
  CHECK(r.samples == 21);
  CHECK(r.samples_without_stack == 1);
  CHECK(r.lost_records == 7);
  CHECK(r.truncated_stacks == 1);
  CHECK(r.threads == 3);
  CHECK(r.processes == 2);
  REQUIRE(r.sections.size() == 2);
  const auto& app = r.sections[0];
  CHECK(app.process_name == "app");
  CHECK(app.pid == 10);
  CHECK(app.thread_name.empty());
  CHECK(app.samples == 18);
  REQUIRE(app.by_self.size() >= 3);
  CHECK(app.by_self[0].name == "compute");
  CHECK(app.by_self[0].self == 10);  // 9 under main, 1 under the truncated label
  CHECK(app.by_self[0].self_percent == Approx(100.0 * 10 / 18));
  CHECK(app.by_total[0].name == "main");
  CHECK(app.by_total[0].total == 17);
  const auto& child = r.sections[1];
  CHECK(child.process_name == "child");
  CHECK(child.samples == 3);
  CHECK(child.by_self[0].name == "libdemo.so+0x2234");

  std::string text = sinks::format_report(r, o);
  INFO(text);
  CHECK(text.find("21 samples in 3 threads of 2 processes; 7 lost records; 1 unwind failures") !=
        std::string::npos);
  CHECK(text.find("process app (pid 10): 18 samples") != std::string::npos);
  CHECK(text.find("   55.56%   77.78%        10  compute") != std::string::npos);
}

TEST_CASE("report per thread, limit, no inline, tree") {
  sinks::ReportOptions o;
  o.per_thread = true;
  o.limit = 1;
  o.tree = true;
  auto r = sinks::make_report(test::sink_profile(), o);
  REQUIRE(r.sections.size() == 3);
  CHECK(r.sections[0].thread_name == "app");
  CHECK(r.sections[0].samples == 13);
  CHECK(r.sections[1].thread_name == "worker");
  CHECK(r.sections[1].tid == 11);
  CHECK(r.sections[1].process_name == "app");
  CHECK(r.sections[1].by_self.size() == 1);
  CHECK(r.sections[1].by_total.size() == 1);
  REQUIRE(r.sections[0].tree.size() == 1);
  const auto& main_node = r.sections[0].tree[0];
  CHECK(main_node.name == "main");
  CHECK(main_node.total == 13);
  REQUIRE(!main_node.children.empty());
  CHECK(main_node.children[0].name == "compute");  // largest first
  CHECK(main_node.children[0].total == 9);
  std::string text = sinks::format_report(r, o);
  INFO(text);
  CHECK(text.find("  100.00%   0.00%  main\n   69.23%  38.46%    compute\n") != std::string::npos);
}

TEST_CASE("report as JSON") {
  test::TempDir dir;
  {
    auto out = sinks::OutputFile::create(dir.file("r.json"));
    REQUIRE(out);
    {
      JsonWriter w(**out);
      sinks::write_report_json(sinks::make_report(with_losses(), {}), w);
    }
    REQUIRE((*out)->finish());
  }
  simdjson::dom::parser parser;
  auto doc = test::parse_json(parser, test::read_profile_text(dir.file("r.json")));
  CHECK(uint64_t(doc["samples"]) == 21);
  CHECK(uint64_t(doc["lostRecords"]) == 7);
  CHECK(uint64_t(doc["truncatedStacks"]) == 1);
  auto sec = doc["sections"].at(0);
  CHECK(std::string_view(sec["process"]) == "app");
  CHECK(std::string_view(sec["topFunctionsBySelf"].at(0)["name"]) == "compute");
  CHECK(uint64_t(sec["topFunctionsBySelf"].at(0)["selfSamples"]) == 10);
}

TEST_CASE("the summary after recording names the top self functions") {
  CHECK(sinks::top_self_summary(test::sink_profile(), 2) == "compute 50.0%, helper 25.0%");
  CHECK(sinks::top_self_summary(model::Profile{}, 5).empty());
}

TEST_CASE("names from the file reach the terminal with their control characters escaped") {
  // A shared profile's names may carry escape sequences: clear the screen, set the title, write the
  // clipboard (OSC 52). The report prints them escaped, names of processes, threads and functions alike.
  model::Profile p = test::sink_profile();
  p.processes[0].name = "app\x1b[2J";
  p.processes[0].threads[1].name = "work\x1b]0;pwned\x07";
  std::vector<model::FrameId> path{p.label_frame("main", model::Category::User),
                                   p.label_frame("evil\x1b]52;c;cm0gLXJm\x07\xc2\x9b"
                                                 "1m",
                                                 model::Category::User)};
  auto s = p.stacks.intern_path(path);
  for (int i = 0; i < 30; ++i)
    p.processes[0].threads[0].samples.push_back({test::kSinkT0 + 99'000'000, s, 1});
  p.meta.data_quality.push_back({"Deleted while running, not readable: /tmp/\x1b[31mx", 1});
  for (bool per_thread : {false, true}) {
    sinks::ReportOptions o;
    o.per_thread = per_thread;
    o.tree = true;
    const std::string text = sinks::format_report(sinks::make_report(p, o), o);
    INFO(text);
    for (char c : text) CHECK((c == '\n' || static_cast<unsigned char>(c) >= 0x20));
    CHECK(text.find("\xc2\x9b") == std::string::npos);
    CHECK(text.find("evil\\e]52;c;cm0gLXJm\\x07\\u009b1m") != std::string::npos);
    CHECK(text.find("data quality: Deleted while running, not readable: /tmp/\\e[31mx (1)") !=
          std::string::npos);
    if (per_thread)
      CHECK(text.find("thread work\\e]0;pwned\\x07 (tid 11) of app\\e[2J (pid 10): ") != std::string::npos);
    else
      CHECK(text.find("process app\\e[2J (pid 10): ") != std::string::npos);
  }
  CHECK(sinks::top_self_summary(p, 1).starts_with("evil\\e]52;c;cm0gLXJm\\x07\\u009b1m "));
}

namespace {

// sink_profile with 60 [preempted] and 20 [blocked: futex] samples under main in the app thread: what a
// busy machine adds to the same code's profile.
model::Profile busy_profile() {
  model::Profile p = test::sink_profile();
  for (auto [reason, n] : {std::pair{"[preempted]", 60}, std::pair{"[blocked: futex]", 20}}) {
    std::vector<model::FrameId> path{p.label_frame("main", model::Category::User),
                                     p.label_frame(reason, model::Category::Idle)};
    auto s = p.stacks.intern_path(path);
    for (int i = 0; i < n; ++i)
      p.processes[0].threads[0].samples.push_back({test::kSinkT0 + 99'000'000, s, 0});
  }
  return p;
}

}  // namespace

TEST_CASE("report and the summary rank on-CPU samples, off-CPU time beside them; --wall counts all") {
  const model::Profile p = busy_profile();
  // 100 samples with a stack: 20 on the CPU, 60 preempted, 20 blocked.
  CHECK(sinks::top_self_summary(p, 2) ==
        "compute 50.0%, helper 25.0% (on-CPU); preempted 60.0%, blocked: futex 20.0% of wall time");
  sinks::ReportOptions o;
  sinks::Report cpu = sinks::make_report(p, o);
  CHECK(cpu.samples == 20);
  CHECK(cpu.wall.samples == 100);
  REQUIRE(cpu.sections.size() == 2);
  CHECK(cpu.sections[0].by_self[0].name == "compute");
  CHECK(cpu.sections[0].by_self[0].self_percent == Approx(9.0 / 17 * 100));
  CHECK(cpu.sections[0].wall.samples == 97);
  const std::string text = sinks::format_report(cpu, o);
  INFO(text);
  CHECK(text.find("shares of on-CPU samples (20 of 100 wall-clock samples; --wall counts all); off-CPU: "
                  "preempted 60.0%, blocked: futex 20.0% of wall time\n") != std::string::npos);
  CHECK(text.find("  off-CPU: preempted 61.9%, blocked: futex 20.6% of wall time\n") != std::string::npos);
  CHECK(text.find("[preempted]") == std::string::npos);
  o.clock = sinks::Clock::Wall;
  sinks::Report wall = sinks::make_report(p, o);
  CHECK(wall.samples == 100);
  CHECK(wall.sections[0].by_self[0].name == "[preempted]");
  CHECK(sinks::format_report(wall, o).find("shares of wall-clock samples") != std::string::npos);
}

TEST_CASE("the summary counts standard-library code inlined into a function for that function") {
  // main -> compute, with Rust's core::ptr::copy and C++'s std::vector<int>::size inlined into compute:
  // perf's symbol-level view would show compute alone.
  model::Profile p;
  p.binaries.push_back({"app", "/tmp/app", "app", "/tmp/app", "AB", "ab", ""});
  auto frame = [&](const char* name, uint8_t depth) {
    model::Frame f;
    f.address = 0x1000;
    f.name = p.strings.intern(name);
    f.inline_depth = depth;
    f.binary = 0;
    return p.frames.intern(f);
  };
  const model::FrameId main_f = frame("main", 0), compute = frame("compute", 0);
  const model::FrameId copy = frame("core::ptr::copy<u8>", 1),
                       size = frame("std::vector<int>::size() const", 1);
  const model::FrameId user = frame("app::checksum", 1);
  model::Thread& t = p.processes.emplace_back().threads.emplace_back();
  auto add = [&](std::vector<model::FrameId> path, int n) {
    auto s = p.stacks.intern_path(path);
    for (int i = 0; i < n; ++i) t.samples.push_back({test::kSinkT0, s, 1});
  };
  add({main_f, compute, copy}, 6);
  add({main_f, compute, size}, 2);
  add({main_f, compute}, 1);
  add({main_f, compute, user}, 3);  // the program's own inlined function keeps its samples
  add({main_f}, 4);
  CHECK(sinks::top_self_summary(p, 3) == "compute 56.2%, main 25.0%, app::checksum 18.8%");
}

TEST_CASE("unwind failures are counted among the samples the shares are of: off-CPU ones only with --wall") {
  model::Profile p = busy_profile();  // 20 samples on the CPU, 80 off it
  // 30 off-CPU stacks that ended in a truncated unwind (a blocked thread's stack, walked from the kernel).
  std::vector<model::FrameId> path{p.label_frame("(stack truncated)"),
                                   p.label_frame("main", model::Category::User),
                                   p.label_frame("[blocked: futex]", model::Category::Idle)};
  const auto s = p.stacks.intern_path(path);
  for (int i = 0; i < 30; ++i)
    p.processes[0].threads[0].samples.push_back({test::kSinkT0 + 99'000'000, s, 0});
  sinks::ReportOptions o;
  sinks::Report cpu = sinks::make_report(p, o);
  CHECK(cpu.truncated_stacks == 0);  // was 30 "of 20 samples" (150%)
  CHECK(sinks::format_report(cpu, o).find("0 unwind failures (stack truncated, 0.0%)") != std::string::npos);
  o.clock = sinks::Clock::Wall;
  sinks::Report wall = sinks::make_report(p, o);
  CHECK(wall.truncated_stacks == 30);
  CHECK(sinks::format_report(wall, o).find("30 unwind failures (stack truncated, 23.1%)") !=
        std::string::npos);
}
