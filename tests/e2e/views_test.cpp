// Issue 21: what the views (the Firefox Profiler through profiler-cli, `fxprof report`, the exports and the
// summary line) say is what happened.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

void require_lint_clean(const std::string& text) {
  auto problems = lint_gecko_profile(text);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  REQUIRE(problems.empty());
}

// Samples of folded stacks ("a;b;c N" lines) whose stack holds `function`, and all samples.
std::pair<uint64_t, uint64_t> folded_count(const std::string& folded, const std::string& function) {
  uint64_t with = 0, all = 0;
  std::istringstream in(folded);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const uint64_t n = std::stoull(line.substr(sp + 1));
    all += n;
    const std::string stack = ";" + line.substr(0, sp) + ";";
    if (stack.find(";" + function + ";") != std::string::npos) with += n;
  }
  return {with, all};
}

// `profiler-cli thread functions --include-idle` of the main thread of the profile `cli` has loaded.
std::string cli_functions(ProfilerCli& cli) {
  REQUIRE(cli.select_thread("GeckoMain"));
  auto r = cli.cmd({"thread", "functions", "--include-idle"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  return r.out;
}

}  // namespace

// touch_page's first instruction faults on a fresh page each call and before_touch ends right before it: a
// lookup one byte early names before_touch for most samples (77% before the fix).
TEST_CASE("views: an interrupted instruction is named, not the one before it", "[e2e][views]") {
  TempDir dir;
  const std::string lazy = dir.file("lazy.json.gz"), baked = dir.file("baked.json.gz");
  auto r = record(lazy, {test_program("views_fault_first"), "384"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  require_lint_clean(read_profile_text(lazy));

  // fxprof's own lookups: report, folded export.
  auto rep = run({fxprof_bin(), "report", lazy});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  CHECK(rep.out.find("touch_page") != std::string::npos);
  CHECK(rep.out.find("before_touch") == std::string::npos);
  auto folded = run({fxprof_bin(), "export", "folded", lazy, "-o", "-"});
  REQUIRE(folded.status == 0);
  const auto [touch, all] = folded_count(folded.out, "touch_page");
  const auto [before, all2] = folded_count(folded.out, "before_touch");
  INFO(folded.out.substr(0, 4000));
  CHECK(touch * 2 > all);  // the faults are the program's time
  CHECK(before * 50 <= touch);

  // The front end's own code on the served (lazy) profile.
  {
    ProfilerCli cli;
    auto server = load_through_fxprof(cli, lazy);
    const std::string fns = cli_functions(cli);
    INFO(fns);
    CHECK(fns.find("touch_page") != std::string::npos);
    CHECK(fns.find("before_touch") == std::string::npos);
  }

  // A baked profile (record -s symbolicates), and the summary line of that run.
  auto b = run({fxprof_bin(), "record", "-s", "-o", baked, "--", test_program("views_fault_first"), "384"});
  INFO(b.err);
  REQUIRE(b.status == 0);
  CHECK(b.err.find("before_touch") == std::string::npos);
  ProfilerCli cli;
  auto load = cli.load(baked);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  const std::string fns = cli_functions(cli);
  INFO(fns);
  CHECK(fns.find("touch_page") != std::string::npos);
  CHECK(fns.find("before_touch") == std::string::npos);
}
