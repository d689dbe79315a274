// The counter tracks as the Firefox Profiler draws them (issue 38.2): straight lines between samples, up to
// the last one. Every track of a process lasts to its end, and a value that held is drawn held, not as a
// ramp from its previous change (model/counters.h, the one writer of every counter).
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

constexpr int64_t kMiB = 1 << 20;

struct Point {
  double time;
  int64_t count;  // the sample's `count` (a change, or the count in the interval)
  int64_t level;  // the running sum (what a Memory track draws)
};
struct Track {
  std::string name, category;
  std::vector<Point> points;
};

// The top process's counter tracks, as written.
std::vector<Track> tracks(simdjson::dom::element doc) {
  std::vector<Track> out;
  for (simdjson::dom::element c : simdjson::dom::array(doc["counters"])) {
    Track t{std::string(std::string_view(c["name"])), std::string(std::string_view(c["category"])), {}};
    const int64_t time_col = int64_t(c["samples"]["schema"]["time"]);
    const int64_t count_col = int64_t(c["samples"]["schema"]["count"]);
    int64_t level = 0;
    for (simdjson::dom::element s : simdjson::dom::array(c["samples"]["data"])) {
      auto row = simdjson::dom::array(s);
      const int64_t count = int64_t(row.at(static_cast<size_t>(count_col)));
      level += count;
      t.points.push_back({row.at(static_cast<size_t>(time_col)).get_double().value(), count, level});
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Each track's end as the front end's own code reads it (profiler-cli's counter info), by name.
std::map<std::string, double> cli_track_ends(const std::string& profile) {
  ProfilerCli cli;
  auto load = cli.load(profile);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list = cli.cmd({"counter", "list", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  simdjson::dom::parser parser;
  std::map<std::string, double> ends;
  for (simdjson::dom::element c : simdjson::dom::array(parse_json(parser, list.out)["counters"])) {
    auto info = cli.cmd({"counter", "info", std::string(std::string_view(c["counterHandle"])), "--json"});
    REQUIRE(info.status == 0);
    simdjson::dom::parser info_parser;
    ends[std::string(std::string_view(c["name"]))] = double(parse_json(info_parser, info.out)["rangeEnd"]);
  }
  return ends;
}

}  // namespace

TEST_CASE("counters: every track lasts to its process's end, and a change after a quiet time is a step",
          "[counters]") {
  // 64 MiB touched at the start (page faults), held 300 ms, freed, then 300 ms asleep: the fault and switch
  // tracks went quiet long before the exit (they ended there).
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto r = record(out, {test_program("rss_touch"), "64", "300", "300"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, read_profile_text(out));
  const double shutdown = double(doc["meta"]["shutdownTime"]);
  double started = -1;  // the program's main thread's start (the process's: meta.startTime is fxprof's)
  for (simdjson::dom::element th : simdjson::dom::array(doc["threads"]))
    if (std::string_view(th["name"]) == "GeckoMain") started = double(th["registerTime"]);
  const std::vector<Track> ts = tracks(doc);
  bool switches = false;
  for (const Track& t : ts) {
    INFO(t.name << " (" << t.category << "): samples from " << t.points.front().time << " to "
                << t.points.back().time << " ms, the process from " << started << " to " << shutdown);
    REQUIRE(!t.points.empty());
    CHECK(t.points.back().time == Approx(shutdown).margin(0.01));
    // The scheduling tracks start with the process, not at the sampler's first tick (10 ms later).
    if (t.category == "Scheduling") CHECK(t.points.front().time == Approx(started).margin(0.01));
    if (t.name != "Context switches") continue;
    switches = true;
    // A rate track: each interval with switches starts at the read before it (one 10 ms tick; a loaded
    // machine may delay a tick), never at a change far earlier (a slope across a quiet time). The first
    // read's interval starts at the process's start (above), however late the sampler's first tick came.
    for (size_t i = 2; i < t.points.size(); ++i) {
      INFO("sample " << i << " at " << t.points[i].time << " ms, count " << t.points[i].count);
      if (t.points[i].count != 0) CHECK(t.points[i].time - t.points[i - 1].time < 150);
    }
  }
  CHECK(switches);
  // The Firefox Profiler's own code reads every track to the process's end.
  const auto ends = cli_track_ends(out);
  CHECK(ends.size() == ts.size());
  for (const auto& [name, end] : ends) {
    INFO(name << " ends at " << end << " ms, the process at " << shutdown);
    CHECK(end == Approx(shutdown).margin(0.01));
  }
  // The run-queue delay says its unit (the front end's tooltip of a rate track is the name and the count).
  for (const Track& t : ts)
    if (t.name.starts_with("Run-queue delay")) CHECK(t.name == "Run-queue delay (µs)");
}

TEST_CASE("counters: a heap block held is drawn held until its free, a step down", "[counters]") {
  // 48 MiB malloc'd, held 300 ms (nothing else allocates meanwhile), freed, then 100 ms more.
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto r = record(out, {test_program("rss_touch"), "48", "300", "100"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, read_profile_text(out));
  const double shutdown = double(doc["meta"]["shutdownTime"]);
  const Track* heap = nullptr;
  const std::vector<Track> ts = tracks(doc);
  for (const Track& t : ts)
    if (t.name == "Heap") heap = &t;
  REQUIRE(heap);
  CHECK(heap->points.back().time == Approx(shutdown).margin(0.01));
  size_t fall = 0;
  for (size_t i = 1; i < heap->points.size(); ++i)
    if (heap->points[i].count <= -40 * kMiB) fall = i;
  REQUIRE(fall > 0);
  INFO("the free at " << heap->points[fall].time << " ms, the sample before at "
                      << heap->points[fall - 1].time << " ms");
  // The sample before the free holds the block's level and is within a 1 ms bucket of it.
  CHECK(heap->points[fall - 1].level >= 48 * kMiB);
  CHECK(heap->points[fall].time - heap->points[fall - 1].time <= 1.01);
}

}  // namespace fxprof::test
