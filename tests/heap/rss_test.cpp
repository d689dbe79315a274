// The RSS counter every recording gets (recorder/rss.h), without --heap: checked in the profile and through
// the Firefox Profiler's own code (profiler-cli's counter list).
#include <catch2/catch.hpp>
#include <string>

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

}  // namespace
}  // namespace fxprof::test
