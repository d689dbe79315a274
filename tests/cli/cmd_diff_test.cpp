// `fxprof diff`: a program whose second function became 2x slower; that function leads the table with a
// positive change, the differential flame graph is XML, and --serve serves both profiles, each selecting its
// busiest thread in the comparison URL, on the ports --port names.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/sink_cli.h"

using namespace fxprof::test;

TEST_CASE("diff names the function made 2x slower first, with a positive change") {
  TempDir dir;
  record_exp_work(dir.file("base.json.gz"), "1");
  record_exp_work(dir.file("new.json.gz"), "2");
  auto r =
      run({fxprof_bin(), "diff", dir.file("base.json.gz"), dir.file("new.json.gz"), "-o", dir.file("d.svg")});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);  // totals
  std::getline(lines, line);  // header
  std::getline(lines, line);  // the first row
  CHECK(line.find("beta(long)") != std::string::npos);
  // base ~33% -> new ~50%: the self change column is positive, around +17 points.
  std::istringstream row(line);
  std::string base_self, new_self, change;
  row >> base_self >> new_self >> change;
  INFO(line);
  REQUIRE(change.front() == '+');
  CHECK(std::stod(change.substr(1)) > 8);
  CHECK(std::stod(change.substr(1)) < 26);

  auto lint = run({"xmllint", "--noout", dir.file("d.svg")});
  CHECK(lint.status == 0);
  std::string svg = read_profile_text(dir.file("d.svg"));
  CHECK(svg.find("Differential Flame Graph") != std::string::npos);
  CHECK(svg.find("data-n=\"beta(long)\"") != std::string::npos);
}

TEST_CASE("diff --serve serves both profiles, symbolicated, for the comparison view") {
  TempDir dir;
  record_exp_work(dir.file("base.json.gz"), "1");
  record_exp_work(dir.file("new.json.gz"), "2");
  Background serve({fxprof_bin(), "diff", "--serve", dir.file("base.json.gz"), dir.file("new.json.gz"), "-o",
                    dir.file("d.svg")});
  std::string base_line = serve.wait_for_line("base profile: ");
  std::string new_line = serve.wait_for_line("new profile: ");
  std::string compare = serve.wait_for_line("/compare/?profiles[]=");
  INFO(serve.err());
  REQUIRE(!base_line.empty());
  REQUIRE(!compare.empty());
  CHECK(compare.find("from-url") != std::string::npos);
  auto url_of = [](const std::string& line) { return line.substr(line.find("http://")); };
  for (const std::string& url : {url_of(base_line), url_of(new_line)}) {
    ProfilerCli cli;
    auto load = cli.load(url);
    INFO(url << "\n" << load.out << load.err);
    REQUIRE(load.status == 0);
    REQUIRE(cli.select_thread("GeckoMain"));
    auto tree = cli.cmd({"thread", "samples-top-down"});
    CHECK(tree.out.find("beta(long)") != std::string::npos);
  }
  CHECK(serve.stop(SIGINT) == 0);
}

TEST_CASE("diff --fail-above: the same program passes, a 2x slower function fails with exit 3") {
  // 4000 samples a second: 1200-1600 a run, so that a share's sampling error (the gate's margin) is about
  // 3.5 points, not 7 as at 1000.
  TempDir dir;
  record_exp_work(dir.file("a1.json.gz"), "1", true, "4000");
  record_exp_work(dir.file("a2.json.gz"), "1", true, "4000");
  record_exp_work(dir.file("b1.json.gz"), "2", true, "4000");
  record_exp_work(dir.file("b2.json.gz"), "2", true, "4000");
  auto same = run({fxprof_bin(), "diff", "--fail-above", "5", dir.file("a1.json.gz"), dir.file("a2.json.gz"),
                   "-o", dir.file("d.svg")});
  INFO(same.out << same.err);
  CHECK(same.status == 0);
  CHECK(same.out.find("fxprof: gate passed") != std::string::npos);

  // beta: 1/3 -> 1/2 of the samples, about +17 points: beyond 5 and the sampling error.
  auto slower = run({fxprof_bin(), "diff", "--fail-above", "5", dir.file("a1.json.gz"),
                     dir.file("b1.json.gz"), "-o", dir.file("d.svg")});
  INFO(slower.out << slower.err);
  CHECK(slower.status == 3);
  CHECK(slower.out.find("fxprof: gate failed: beta(long) self share grew +") != std::string::npos);

  // --function gates on one function's total share.
  auto alpha = run({fxprof_bin(), "diff", "--fail-above", "5", "--function", "alpha(long)",
                    dir.file("a1.json.gz"), dir.file("b1.json.gz"), "-o", dir.file("d.svg")});
  CHECK(alpha.status == 0);  // alpha's share shrank

  // Several runs per side: means and spreads; --markdown for a pull request.
  auto runs = run({fxprof_bin(), "diff", "--markdown", "--fail-above", "5", dir.file("a1.json.gz"),
                   dir.file("a2.json.gz"), "--", dir.file("b1.json.gz"), dir.file("b2.json.gz"), "-o",
                   dir.file("d.svg")});
  INFO(runs.out << runs.err);
  CHECK(runs.status == 3);
  CHECK(runs.out.find("**gate failed: beta(long)") == 0);
  CHECK(runs.out.find("Base: 2 run(s)") != std::string::npos);
  CHECK(runs.out.find("| function | self base |") != std::string::npos);
  CHECK(runs.out.find("| beta(long) |") != std::string::npos);

  // A change within the spread of a side's runs is not a failure: base mixes the fast and the slow
  // program (beta's share ranges over ~17 points), new is the slow one twice: beta grows ~8 points, above
  // the limit of 5 but within base's spread.
  auto noise = run({fxprof_bin(), "diff", "--fail-above", "5", dir.file("a1.json.gz"), dir.file("b1.json.gz"),
                    "--", dir.file("b1.json.gz"), dir.file("b2.json.gz"), "-o", dir.file("d.svg")});
  INFO(noise.out);
  CHECK(noise.status == 0);
  CHECK(noise.out.find("fxprof: gate passed") != std::string::npos);
}

TEST_CASE("diff: the gate's usage errors") {
  auto r = run({fxprof_bin(), "diff", "--function", "x", "a", "b"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--function goes with --fail-above") != std::string::npos);
  auto one = run({fxprof_bin(), "diff", "a", "--"});
  CHECK(one.status == 2);
  CHECK(one.err.find("at least one profile on each side") != std::string::npos);
}

namespace {

// Two consecutive free ports on 127.0.0.1 (bound and released: another program could take one in between,
// which the caller's retry covers).
int free_port_pair() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int base =
        20000 + static_cast<int>((static_cast<unsigned>(getpid()) * 7919u + attempt * 104729u) % 20000u);
    bool ok = true;
    for (int p = base; p < base + 2 && ok; ++p) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(p));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      if (fd >= 0) close(fd);
    }
    if (ok) return base;
  }
  return 0;
}

// The `profiles[]` URLs of a comparison URL, decoded.
std::vector<std::string> compared_urls(const std::string& line) {
  std::vector<std::string> out;
  const std::string key = "profiles[]=";
  for (size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + 1)) {
    const size_t from = at + key.size();
    out.push_back(url_decode(line.substr(from, line.find_first_of("& \r\n", from) - from)));
  }
  return out;
}

// The first line of `text` that holds `needle` ("" when none does).
std::string line_with(const std::string& text, std::string_view needle) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) return line;
  return "";
}

}  // namespace

TEST_CASE("diff --serve --port: each profile of the comparison selects its busiest thread") {
  TempDir dir;
  // Fifteen idle threads, then the busy one: its index is 10 or more, a letter in the URL's encoding, which
  // the front end reads only in a URL that says its version (issue 38.1).
  for (const char* name : {"base.json.gz", "new.json.gz"}) {
    auto r =
        run({fxprof_bin(), "record", "--save-only", "-o", dir.file(name), "--", test_program("e2e_many")});
    INFO(r.err);
    REQUIRE(r.status == 0);
  }
  // The index the front end's importer gives the busy thread (profiler-cli lists threads busiest first).
  auto busiest = [&](const std::string& file) {
    ProfilerCli cli;
    auto load = cli.load(file);
    INFO(load.out << load.err);
    REQUIRE(load.status == 0);
    auto list = cli.cmd({"thread", "list", "--json"});
    REQUIRE(list.status == 0);
    simdjson::dom::parser parser;
    auto doc = parse_json(parser, list.out);
    simdjson::dom::element first = simdjson::dom::array(doc["threads"]).at(0);
    INFO(list.out);
    CHECK(std::string_view(first["name"]) == "many-busy");
    return int64_t(first["threadIndex"]);
  };
  const int64_t expected[2] = {busiest(dir.file("base.json.gz")), busiest(dir.file("new.json.gz"))};
  CHECK(expected[0] >= 10);

  std::string compare, base_line;
  std::vector<std::string> selected;
  int port = 0, status = -1;
  for (int attempt = 0; attempt < 3 && compare.empty(); ++attempt) {  // a port taken in between: another pair
    port = free_port_pair();
    REQUIRE(port > 0);
    Background serve({fxprof_bin(), "diff", "--serve", "-P", std::to_string(port), dir.file("base.json.gz"),
                      dir.file("new.json.gz"), "-o", dir.file("d.svg")});
    // The comparison's line comes last: wait for it alone (an ASan diff beside two busy loops and builds
    // took over a minute to print its first line), then find the base's line among those before it.
    compare = serve.wait_for_line("/compare/?profiles[]=", std::chrono::seconds(150));
    INFO(serve.err());
    if (compare.empty()) continue;
    base_line = line_with(serve.out(), "base profile: ");
    // The thread each inner URL opens, as the front end reads it (profiler-cli loads a profiler URL with the
    // front end's own URL handling), while the profiles are served.
    for (const std::string& inner : compared_urls(compare)) {
      ProfilerCli cli;
      auto load = cli.load_args({inner});
      INFO(inner << "\n" << load.out << load.err);
      REQUIRE(load.status == 0);
      auto st = cli.cmd({"status", "--json"});
      REQUIRE(st.status == 0);
      simdjson::dom::parser parser;
      simdjson::dom::array threads = parse_json(parser, st.out)["selectedThreads"];
      REQUIRE(threads.size() == 1);
      selected.emplace_back(std::string_view(threads.at(0)["name"]));
    }
    status = serve.stop(SIGINT);
  }
  REQUIRE(!compare.empty());
  CHECK(status == 0);
  CHECK(selected == std::vector<std::string>{"many-busy", "many-busy"});
  CHECK(base_line.find("http://127.0.0.1:" + std::to_string(port) + "/") != std::string::npos);
  const std::vector<std::string> urls = compared_urls(compare);
  REQUIRE(urls.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO(urls[i]);
    CHECK(urls[i].find("127.0.0.1%3A" + std::to_string(port + static_cast<int>(i)) + "%2F") !=
          std::string::npos);
    // thread=N in the front end's uintarray encoding (one character of 0-9a-v below 32), after the URL
    // version that encoding belongs to.
    const size_t at = urls[i].find("/calltree/?v=7&thread=");
    REQUIRE(at != std::string::npos);
    const std::string enc = urls[i].substr(at + 22);
    const std::string digits = "0123456789abcdefghijklmnopqrstuv";
    REQUIRE(enc.size() == 1);
    CHECK(static_cast<int64_t>(digits.find(enc[0])) == expected[i]);
  }
  auto bad = run(
      {fxprof_bin(), "diff", "--serve", "-P", "70000", dir.file("base.json.gz"), dir.file("new.json.gz")});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--port: expected a port number (the second profile takes PORT+1) between 1 and 65534, "
                     "got '70000'") != std::string::npos);
}
