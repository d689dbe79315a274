// The RSS counter every recording gets (recorder/rss.h), without --heap: checked in the profile and through
// the Firefox Profiler's own code (profiler-cli's counter list).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST_CASE("rss: a program touching 64 MiB has an RSS counter that reaches 64 MiB", "[rss]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("rss_touch"), "64", "400"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  int rss_counters = 0;
  int64_t max = 0, value = 0;
  size_t samples = 0;
  for (simdjson::dom::element c : simdjson::dom::array(doc["counters"])) {
    if (std::string_view(c["name"]) != "RSS") continue;
    ++rss_counters;
    CHECK(std::string_view(c["category"]) == "Memory");
    double last_time = -1;
    for (simdjson::dom::element s : simdjson::dom::array(c["samples"]["data"])) {
      auto row = simdjson::dom::array(s);
      double time = row.at(0).get_double().value();
      CHECK(time > last_time);
      last_time = time;
      value += int64_t(row.at(1));
      max = std::max(max, value);
      ++samples;
    }
  }
  CHECK(rss_counters == 1);
  CHECK(samples >= 2);
  CHECK(max >= 64 * kMiB);
  CHECK(max <= 64 * kMiB + 16 * kMiB);

  // The Firefox Profiler draws it as a memory track of the program's process.
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list = cli.cmd({"counter", "list", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  auto ldoc = parse_json(parser, list.out);
  int memory_tracks = 0;
  for (simdjson::dom::element c : simdjson::dom::array(ldoc["counters"]))
    if (std::string_view(c["name"]) == "RSS" && std::string_view(c["category"]) == "Memory") ++memory_tracks;
  CHECK(memory_tracks == 1);
}

TEST_CASE("rss: the track lasts the process's life and a drop is a step", "[rss]") {
  // 64 MiB held 300 ms, unmapped, then 300 ms more of life at the lower value.
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("rss_touch"), "64", "300", "300"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto text = read_profile_text(out);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  const double shutdown = double(doc["meta"]["shutdownTime"]);
  struct Point {
    double time;
    int64_t value;
  };
  std::vector<Point> points;
  int64_t value = 0;
  for (simdjson::dom::element c : simdjson::dom::array(doc["counters"])) {
    if (std::string_view(c["name"]) != "RSS") continue;
    // No `number` column: the front end's memory tooltip would count "0 allocations and deallocations".
    CHECK(c["samples"]["schema"]["number"].error() == simdjson::NO_SUCH_FIELD);
    for (simdjson::dom::element s : simdjson::dom::array(c["samples"]["data"])) {
      auto row = simdjson::dom::array(s);
      value += int64_t(row.at(1));
      points.push_back({row.at(0).get_double().value(), value});
    }
  }
  REQUIRE(points.size() >= 3);
  INFO("shutdown " << shutdown << " ms, last sample " << points.back().time << " ms");
  // The last value holds to the exit: the track ends with the process, 300 ms after the drop.
  CHECK(points.back().time == Approx(shutdown).margin(0.01));
  // The drop (munmap may take more than one 10 ms tick on a loaded machine): the first sample well under
  // the peak after it.
  size_t peak = 0, drop = 0;
  for (size_t i = 0; i < points.size(); ++i)
    if (points[i].value > points[peak].value) peak = i;
  for (size_t i = peak + 1; i < points.size() && drop == 0; ++i)
    if (points[i].value < points[peak].value - 8 * kMiB) drop = i;
  REQUIRE(points[peak].value >= 64 * kMiB);
  REQUIRE(drop > 0);
  // A step: the last reading of the high value comes one tick before the drop (a loaded machine may delay a
  // tick), not at the rise 300 ms earlier. A tick may land inside the munmap (the kernel frees a 64 MiB
  // mapping in batches, and each batch lowers RSS): that reading lies between, so the step is the readings
  // from the last high one to the drop, falling, all within 100 ms.
  size_t last_high = drop - 1;
  while (last_high > peak && points[last_high].value != points[peak].value) --last_high;
  for (size_t i = last_high + 1; i <= drop; ++i) CHECK(points[i].value < points[i - 1].value);
  CHECK(drop - last_high <= 3);
  CHECK(points[drop].time - points[last_high].time < 100);
  CHECK(points.back().time - points[drop].time > 200);

  // The Firefox Profiler's own code reads it so: the counter spans the process's life.
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list = cli.cmd({"counter", "list", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  std::string handle;
  for (simdjson::dom::element c : simdjson::dom::array(parse_json(parser, list.out)["counters"]))
    if (std::string_view(c["name"]) == "RSS") handle = std::string(std::string_view(c["counterHandle"]));
  REQUIRE(!handle.empty());
  auto info = cli.cmd({"counter", "info", handle, "--json"});
  INFO(info.out << info.err);
  REQUIRE(info.status == 0);
  auto idoc = parse_json(parser, info.out);
  CHECK(double(idoc["rangeEnd"]) == Approx(shutdown).margin(0.01));
  CHECK(uint64_t(idoc["sampleCount"]) == points.size());
}

TEST_CASE("rss: with --heap the two Memory tracks are told apart by name and both last to the end", "[rss]") {
  // 16 MiB held 200 ms: the RSS counter is sure to be sampled; the C++ runtime's start-up allocations give
  // the heap counter.
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("rss_touch"), "16", "200", "100"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  simdjson::dom::parser parser;
  const double shutdown = double(parse_json(parser, read_profile_text(out))["meta"]["shutdownTime"]);
  // The Firefox Profiler labels both "Memory" (its deriveCounterDisplay, from the category); their names
  // tell them apart, and order them under the process (Heap, then RSS).
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list = cli.cmd({"counter", "list", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  std::vector<std::string> memory;
  for (simdjson::dom::element c : simdjson::dom::array(parse_json(parser, list.out)["counters"])) {
    if (std::string_view(c["label"]) != "Memory") continue;
    memory.emplace_back(std::string_view(c["name"]));
    auto info = cli.cmd({"counter", "info", std::string(std::string_view(c["counterHandle"])), "--json"});
    REQUIRE(info.status == 0);
    simdjson::dom::parser info_parser;
    const double end = double(parse_json(info_parser, info.out)["rangeEnd"]);
    INFO(memory.back() << " ends at " << end << " ms, the process at " << shutdown);
    CHECK(end == Approx(shutdown).margin(0.01));
  }
  std::sort(memory.begin(), memory.end());
  CHECK(memory == std::vector<std::string>{"Heap", "RSS"});
}

}  // namespace
}  // namespace fxprof::test
