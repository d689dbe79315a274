// `fxprof diff`: a program whose second function became 2x slower; that function leads the table with a
// positive change, the differential flame graph is XML, and --serve serves both profiles.
#include <signal.h>

#include <catch2/catch.hpp>
#include <sstream>

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
