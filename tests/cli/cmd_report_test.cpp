// `fxprof report`: the terminal tables, --tree, --threads, --inline/--no-inline, and --json checked against
// the Firefox Profiler's own function list (profiler-cli) for the same profile.
#include <catch2/catch.hpp>
#include <map>

#include "tests/cli/sink_cli.h"

using namespace fxprof::test;

TEST_CASE("report --json matches profiler-cli's function list") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile);
  auto rep = run({fxprof_bin(), "report", "--json", "--threads", "--limit", "1000", profile});
  INFO(rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out);
  // The program's main thread (profiler-cli shows it as GeckoMain).
  simdjson::dom::element main_section;
  bool found = false;
  for (auto sec : doc["sections"].get_array())
    if (std::string_view(sec["process"]) == "exp_work" && std::string_view(sec["thread"]) == "exp_work") {
      main_section = sec;
      found = true;
    }
  REQUIRE(found);
  std::map<std::string, std::pair<uint64_t, uint64_t>> ours;  // name -> self, total
  for (auto f : main_section["topFunctionsByTotal"].get_array())
    ours[std::string(std::string_view(f["name"]))] = {uint64_t(f["selfSamples"]),
                                                      uint64_t(f["totalSamples"])};
  REQUIRE(ours.count("alpha(long)"));

  ProfilerCli cli;
  auto load = cli.load(profile);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  REQUIRE(cli.select_thread("GeckoMain"));
  // --include-idle: profiler-cli leaves out samples in the Idle category (off-CPU time) unless asked; our
  // report counts wall-clock time.
  auto fns = cli.cmd({"thread", "functions", "--json", "--limit", "0", "--include-idle"});
  INFO(fns.out << fns.err);
  REQUIRE(fns.status == 0);
  simdjson::dom::parser p2;
  auto theirs = parse_json(p2, fns.out);
  // The front end keys functions by name and library, we by name and file: one of ours may be several of
  // theirs (the same name "in" two libraries). Self samples add up exactly; our total lies between their
  // largest and their sum (a sample may hold both).
  std::map<std::string, std::pair<uint64_t, uint64_t>> self_and_max_total;
  std::map<std::string, uint64_t> total_sum;
  for (auto f : theirs["functions"].get_array()) {
    std::string name = strip_lib(std::string_view(f["name"]));
    if (normalize_frame(name) == "?") continue;
    INFO(name);
    REQUIRE(ours.count(name));
    self_and_max_total[name].first += uint64_t(f["selfSamples"]);
    self_and_max_total[name].second = std::max(self_and_max_total[name].second, uint64_t(f["totalSamples"]));
    total_sum[name] += uint64_t(f["totalSamples"]);
  }
  for (auto& [name, st] : self_and_max_total) {
    INFO(name);
    CHECK(ours[name].first == st.first);
    CHECK(ours[name].second >= st.second);
    CHECK(ours[name].second <= total_sum[name]);
  }
  for (const char* f : {"alpha(long)", "beta(long)", "gamma_work(long)", "main"})
    CHECK(self_and_max_total.count(f));
}

TEST_CASE("report in the terminal: tables, tree, inline or not") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  record_exp_work(profile, "1", false);
  auto r = run({fxprof_bin(), "report", "--tree", profile});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("process exp_work (pid ") != std::string::npos);
  CHECK(r.out.find("top functions by self time") != std::string::npos);
  CHECK(r.out.find("call tree") != std::string::npos);
  CHECK(r.out.find(" lost records; ") != std::string::npos);
  CHECK(r.out.find("  mix_inlined(long)\n") != std::string::npos);

  auto no_inline = run({fxprof_bin(), "report", "--no-inline", "--threads", profile});
  REQUIRE(no_inline.status == 0);
  CHECK(no_inline.out.find("thread exp_work (tid ") != std::string::npos);
  CHECK(no_inline.out.find("mix_inlined") == std::string::npos);
  CHECK(no_inline.out.find("gamma_work(long)") != std::string::npos);

  auto bad = run({fxprof_bin(), "report", "--limit", "0", profile});
  CHECK(bad.status == 2);
  CHECK(bad.err == "fxprof report: --limit needs a positive number (try `fxprof report --help`)\n");
}
