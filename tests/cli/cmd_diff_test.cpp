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

TEST_CASE("diff --fail-above: the same program passes, a 2x slower function fails with exit 3") {
  TempDir dir;
  record_exp_work(dir.file("a1.json.gz"), "1");
  record_exp_work(dir.file("a2.json.gz"), "1");
  record_exp_work(dir.file("b1.json.gz"), "2");
  record_exp_work(dir.file("b2.json.gz"), "2");
  auto same = run({fxprof_bin(), "diff", "--fail-above", "8", dir.file("a1.json.gz"), dir.file("a2.json.gz"),
                   "-o", dir.file("d.svg")});
  INFO(same.out << same.err);
  CHECK(same.status == 0);
  CHECK(same.out.find("fxprof: gate passed") != std::string::npos);

  // beta: 1/3 -> 1/2 of the samples, about +17 points.
  auto slower = run({fxprof_bin(), "diff", "--fail-above", "8", dir.file("a1.json.gz"),
                     dir.file("b1.json.gz"), "-o", dir.file("d.svg")});
  INFO(slower.out << slower.err);
  CHECK(slower.status == 3);
  CHECK(slower.out.find("fxprof: gate failed: beta(long) self share grew +") != std::string::npos);

  // --function gates on one function's total share.
  auto alpha = run({fxprof_bin(), "diff", "--fail-above", "8", "--function", "alpha(long)",
                    dir.file("a1.json.gz"), dir.file("b1.json.gz"), "-o", dir.file("d.svg")});
  CHECK(alpha.status == 0);  // alpha's share shrank

  // Several runs per side: means and spreads; --markdown for a pull request.
  auto runs = run({fxprof_bin(), "diff", "--markdown", "--fail-above", "8", dir.file("a1.json.gz"),
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
