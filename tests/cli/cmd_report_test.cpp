// `fxprof report`: the terminal tables, --tree, --threads, --inline/--no-inline, and --json checked against
// the Firefox Profiler's own function list (profiler-cli) for the same profile.
#include <algorithm>
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
  // We key functions by name and file, the front end by name and library: one name may be several entries on
  // either side (an inline copy from a header has another file). Per name: selfs add up; the samples holding
  // the name number at least the largest entry's total and at most the sum of the entries' totals.
  struct Totals {
    uint64_t self = 0, max_total = 0, sum_total = 0;
    void add(uint64_t s, uint64_t t) {
      self += s;
      max_total = std::max(max_total, t);
      sum_total += t;
    }
  };
  std::map<std::string, Totals> ours;
  for (auto f : main_section["topFunctionsByTotal"].get_array())
    ours[std::string(std::string_view(f["name"]))].add(uint64_t(f["selfSamples"]),
                                                       uint64_t(f["totalSamples"]));
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
  std::map<std::string, Totals> theirs_by_name;
  for (auto f : theirs["functions"].get_array()) {
    std::string name = strip_lib(std::string_view(f["name"]));
    if (normalize_frame(name) == "?") continue;
    INFO(name);
    REQUIRE(ours.count(name));
    theirs_by_name[name].add(uint64_t(f["selfSamples"]), uint64_t(f["totalSamples"]));
  }
  for (auto& [name, t] : theirs_by_name) {
    INFO(name);
    const Totals& o = ours[name];
    CHECK(o.self == t.self);
    CHECK(std::max(o.max_total, t.max_total) <= std::min(o.sum_total, t.sum_total));
  }
  for (const char* f : {"alpha(long)", "beta(long)", "gamma_work(long)", "main"})
    CHECK(theirs_by_name.count(f));
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
  CHECK(bad.err ==
        "fxprof report: --limit: expected a whole number between 1 and 10^9, got '0' (try `fxprof report "
        "--help`)\n");
}

TEST_CASE(
    "report --heap --symbol-dir names a stripped binary's sites in a profile recorded without symbols") {
  TempDir dir;
  const std::string profile = dir.file("bare.json.gz");
  // Recorded without the folder: the stripped binary's sites are named by their FDEs ("...+0x2cd0").
  auto r = run({fxprof_bin(), "record", "--heap=full", "--save-only", "-o", profile, "--",
                test_program("heap_prog_stripped"), "leak", "50", "1000"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto bare = run({fxprof_bin(), "report", "--heap", profile});
  REQUIRE(bare.status == 0);
  CHECK(bare.out.find(" 50 blocks: heap_prog_stripped+0x") != std::string::npos);
  auto named = run({fxprof_bin(), "report", "--heap", "--symbol-dir", test_program("heap_syms"), profile});
  INFO(named.out << named.err);
  REQUIRE(named.status == 0);
  CHECK(named.out.find(" 50 blocks: leak_blocks (heap_prog_stripped)\n        from main\n") !=
        std::string::npos);
  CHECK(named.out.find("heap_prog_stripped+0x") == std::string::npos);
}
