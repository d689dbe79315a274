// What the Firefox Profiler shows when a profile opens (issue 21): the URL fxprof prints selects the busiest
// thread and, by carrying view state, keeps the front end from hiding the threads that wait.
#include <signal.h>

#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <string>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

// The front end's uintarray decoding (src/utils/uintarray-encoding.ts) of one number: 5 value bits per
// character, the continuation bit set on all but the last.
int64_t decode_url_uint(std::string_view s) {
  static constexpr std::string_view kDigits =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._";
  int64_t v = 0;
  for (char c : s) {
    const size_t d = kDigits.find(c);
    if (d == std::string_view::npos) return -1;
    v = v * 32 + static_cast<int64_t>(d & 31);
    if (d < 32) break;
  }
  return v;
}

// The value of query parameter `key` in `url` ("" when absent).
std::string query_param(const std::string& url, const std::string& key) {
  const size_t q = url.find('?');
  if (q == std::string::npos) return "";
  std::string_view rest = std::string_view(url).substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    if (kv.starts_with(key + "=")) return std::string(kv.substr(key.size() + 1));
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
  }
  return "";
}

// The threads as the front end's importer indexes them, with their CPU time: profiler-cli's `thread list`.
struct CliThread {
  int64_t index = -1;
  std::string name;
  double cpu_ms = 0;
};
std::vector<CliThread> cli_threads(ProfilerCli& cli) {
  auto list = cli.cmd({"thread", "list", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, list.out);
  std::vector<CliThread> out;
  for (simdjson::dom::element t : simdjson::dom::array(doc["threads"])) {
    CliThread c;
    c.index = int64_t(t["threadIndex"]);
    c.name = std::string(std::string_view(t["name"]));
    c.cpu_ms = double(t["cpuMs"]);
    out.push_back(c);
  }
  return out;
}

}  // namespace

TEST_CASE("view: the URL opens the busiest thread when its index is 10 or more", "[view]") {
  // Issue 38.1: 15 idle threads started first, the busy one last (index 16: "g" in the URL's encoding).
  // Without the URL's version the front end reads `thread` as a decimal number and falls back to thread 0.
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  Background rec({fxprof_bin(), "record", "-n", "-o", out, "--", test_program("e2e_many")});
  const std::string url = rec.wait_for_line("from-url", std::chrono::seconds(120));
  INFO(rec.err());
  REQUIRE(!url.empty());
  INFO(url);
  CHECK(decode_url_uint(query_param(url, "thread")) >= 10);
  CHECK(selected_by_url(url) == "many-busy");
  CHECK(rec.stop(SIGINT) == 0);

  // `fxprof load` prints the same view, and it opens the same thread.
  FxprofServer server(out);
  INFO(server.err());
  REQUIRE(!server.profiler_url().empty());
  CHECK(query_param(server.profiler_url(), "thread") == query_param(url, "thread"));
  CHECK(selected_by_url(server.profiler_url()) == "many-busy");
}

TEST_CASE("view: the printed URL selects the busy thread and shows the sleeper beside it", "[view]") {
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  // As a user runs it: record, serve, print the URL (no browser).
  Background rec({fxprof_bin(), "record", "-n", "-o", out, "--", test_program("e2e_sleeper")});
  const std::string url = rec.wait_for_line("from-url", std::chrono::seconds(120));
  INFO(rec.err());
  REQUIRE(!url.empty());
  CHECK(rec.stop(SIGINT) == 0);
  // A missing debug file (Debian's libstdc++ has none without its -dbgsym package) is said once, with the
  // package, in one short line, though the served recording names its wake stacks before the summary names
  // its samples (where fxprof looked is in the data-quality notes).
  {
    size_t said = 0;
    std::istringstream lines(rec.err());
    for (std::string line; std::getline(lines, line);) {
      CHECK(!line.starts_with("fxprof: Debug file not found"));
      if (!line.starts_with("fxprof: no debug info for ")) continue;
      ++said;
      CHECK_THAT(line, Catch::Contains("libstdc++") && Catch::Contains("apt install") &&
                           Catch::Contains("libstdc++6-dbgsym"));
      CHECK(line.size() < 200);
    }
    CHECK(said == 1);
  }

  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  const std::vector<CliThread> threads = cli_threads(cli);
  const CliThread *busy = nullptr, *sleeper = nullptr;
  for (const CliThread& t : threads) {
    if (t.name == "e2e-busy") busy = &t;
    if (t.name == "e2e-sleeper") sleeper = &t;
  }
  REQUIRE(busy);
  REQUIRE(sleeper);
  // Without view state the front end would hide the sleeper: under 5% of the busiest thread's CPU.
  CHECK(sleeper->cpu_ms < 0.05 * busy->cpu_ms);

  // `thread` selects the busiest thread by the importer's index; and a URL that selects a thread is one
  // whose hidden tracks the front end takes from the URL (finalizeFullProfileView: hasUrlInfo), none here,
  // instead of computing the default that hides idle threads.
  INFO(url);
  const std::string thread = query_param(url, "thread");
  REQUIRE(!thread.empty());
  CHECK(decode_url_uint(thread) == busy->index);
  CHECK(query_param(url, "hiddenLocalTracksByPid").empty());
  CHECK(query_param(url, "hiddenGlobalTracks").empty());

  // `fxprof load` prints the same view.
  FxprofServer server(out);
  INFO(server.err());
  REQUIRE(!server.profiler_url().empty());
  CHECK(query_param(server.profiler_url(), "thread") == thread);
}

}  // namespace fxprof::test

namespace fxprof::test {

TEST_CASE("view: the note on the local-network prompt names the front end the URL opens", "[view]") {
  // Issue 38.8: PROFILER_URL points at another front end; that one is the site the browser asks about.
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto rec = run({fxprof_bin(), "record", "--save-only", "-o", out, "--", test_program("e2e_many")});
  INFO(rec.err);
  REQUIRE(rec.status == 0);
  CmdOptions o;
  o.env = {{"PROFILER_URL", "https://profiler.example.test"}};
  Background load({fxprof_bin(), "load", "--no-open", out}, o);
  CHECK(!load.wait_for_line("https://profiler.example.test/from-url/").empty());
  load.stop(SIGINT);
  const std::string err = load.err();
  INFO(err);
  CHECK(err.find("ask whether profiler.example.test may access") != std::string::npos);
  CHECK(err.find("profiler.firefox.com") == std::string::npos);
}

}  // namespace fxprof::test
