// `fxprof record --export FORMAT` writes the exports beside the profile; the summary names the top self
// functions unless -q.
#include <catch2/catch.hpp>

#include "tests/cli/sink_cli.h"

using namespace fxprof::test;

TEST_CASE("record --export writes folded, pprof and svg beside the profile, and the top functions") {
  TempDir dir;
  auto r = run({fxprof_bin(), "record", "--save-only", "--export", "folded", "--export", "pprof", "--export",
                "svg", "-o", dir.file("run.json.gz"), "--", test_program("exp_work")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  for (const char* f : {"run.json.gz", "run.folded", "run.pb.gz", "run.svg"}) {
    INFO(f);
    CHECK(!read_profile_text(dir.file(f)).empty());
    const bool reported = std::string(f) == "run.json.gz" ||
                          r.err.find(std::string("wrote ") + dir.file(f)) != std::string::npos;
    CHECK(reported);
  }
  // The folded export agrees with the profile written in the same run.
  CHECK(read_profile_text(dir.file("run.folded")).find("main;alpha(long)") != std::string::npos);
  // "fxprof: top self: beta(long) 33.1%, ..." with three named functions of the program among the five.
  size_t at = r.err.find("fxprof: top self: ");
  REQUIRE(at != std::string::npos);
  std::string line = r.err.substr(at, r.err.find('\n', at) - at);
  INFO(line);
  CHECK(line.find("alpha(long) ") != std::string::npos);
  CHECK(line.find("beta(long) ") != std::string::npos);
  CHECK(line.find('%') != std::string::npos);
}

TEST_CASE("record -q prints no top functions; a bad --export is a usage error") {
  TempDir dir;
  auto r = run({fxprof_bin(), "record", "-q", "--save-only", "-o", dir.file("p.json.gz"), "--",
                test_program("exp_work")});
  REQUIRE(r.status == 0);
  CHECK(r.err.find("top self") == std::string::npos);
  auto bad = run({fxprof_bin(), "record", "--export", "png", "--", "true"});
  CHECK(bad.status == 2);
  CHECK(bad.err == "fxprof record: --export must be folded, pprof or svg (try `fxprof record --help`)\n");
}
