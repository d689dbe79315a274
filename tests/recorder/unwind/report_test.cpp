// The post-recording line about incomplete stacks: when it appears, what it names, which remedy it gives.
#include "recorder/unwind/report.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/support/support.h"

using namespace fxprof::recorder;

TEST_CASE("report: no line at or below 5 % or for tiny threads", "[unwind][report]") {
  std::vector<ThreadStacks> t = {{"main", 10, 1000, 50}, {"tiny", 11, 10, 9}};
  std::vector<UnwindStop> s = {{"/usr/lib/libx.so", 0, 50}};
  CHECK(incomplete_stacks_warning(t, s, 32768).empty());
  CHECK(incomplete_stacks_warning({}, s, 32768).empty());
}

TEST_CASE("report: a failing binary is named, with the .eh_frame / frame-pointer remedy",
          "[unwind][report]") {
  std::vector<ThreadStacks> t = {{"main", 10, 1000, 51}, {"worker", 12, 100, 40}, {"ok", 13, 100, 0}};
  std::vector<UnwindStop> s = {
      {"/opt/app/libjit.so", 2, 80}, {"", 0, 9}, {"/usr/bin/app", 1, 0}, {"/usr/lib/libz.so", 0, 1}};
  std::string line = incomplete_stacks_warning(t, s, 32768);
  INFO(line);
  CHECK(line.starts_with("40% of the stacks of thread 12 (worker) and 1 other thread are incomplete"));
  CHECK(line.find("unwinding stopped in libjit.so (82), code outside any file (JIT, anonymous memory) (9), "
                  "app (1)") != std::string::npos);
  CHECK(line.find("libz.so") == std::string::npos);  // three binaries at most
  CHECK(line.find("missing .eh_frame") != std::string::npos);
  CHECK(line.find("--call-graph fp") != std::string::npos);
  CHECK(line.find("--stack-size (now 32768 bytes") != std::string::npos);  // app's one truncated stack
  CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("report: stacks deeper than the copy get the --stack-size remedy only", "[unwind][report]") {
  std::vector<ThreadStacks> t = {{"deep", 7, 200, 100}};
  std::vector<UnwindStop> s = {{"/usr/bin/deep", 100, 0}};
  std::string line = incomplete_stacks_warning(t, s, 8192);
  INFO(line);
  CHECK(line.starts_with(
      "50% of the stacks of thread 7 (deep) are incomplete; unwinding stopped in deep (100)"));
  CHECK(line.find("raise --stack-size (now 8192 bytes") != std::string::npos);
  CHECK(line.find(".eh_frame") == std::string::npos);
}

TEST_CASE("report: recording a program without unwind information says so, and the meta counts it",
          "[unwind][report]") {
  // unw_noinfo: no .eh_frame, no .debug_frame, no frame pointers: every walk fails in its own code.
  fxprof::test::TempDir dir;
  std::string out = dir.path() + "/p.json.gz";
  auto r = fxprof::test::run({fxprof::test::fxprof_bin(), "record", "--save-only", "-F", "2000",
                              "--no-symbolicate", "-o", out, "--", fxprof::test::test_program("unw_noinfo"),
                              "300"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("% of the stacks of thread") != std::string::npos);
  CHECK(r.err.find("unwinding stopped in unw_noinfo (") != std::string::npos);
  CHECK(r.err.find("missing .eh_frame") != std::string::npos);
  simdjson::dom::parser parser;
  std::string text = fxprof::test::read_profile_text(out);
  auto root = fxprof::test::parse_json(parser, text);
  // "Stack walking" is the section this is about; a loaded machine may add "Data quality" (lost records).
  simdjson::dom::element walking;
  for (simdjson::dom::element e : simdjson::dom::array(root["meta"]["extra"]))
    if (std::string_view(e["label"]) == "Stack walking") walking = e;
  REQUIRE(walking.is_object());
  uint64_t stacks = walking["entries"].at(0)["value"], failed = walking["entries"].at(2)["value"];
  CHECK(stacks >= 20);          // 300 ms at 2 kHz: ~600 on an idle machine
  CHECK(failed * 2 >= stacks);  // most of them
}

TEST_CASE("report: a program that unwinds completely gets no line", "[unwind][report]") {
  fxprof::test::TempDir dir;
  auto r = fxprof::test::run({fxprof::test::fxprof_bin(), "record", "--save-only", "-F", "2000",
                              "--no-symbolicate", "-o", dir.path() + "/p.json.gz", "--",
                              fxprof::test::test_program("unw_dbgframe"), "300"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("are incomplete") == std::string::npos);
}
