// Issue 37.4: what reaches the terminal from a profile (another person's file) is shown, never acted on:
// report's command line and the warning for a library without symbols went out raw.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

void check_no_escapes(const std::string& text) {
  INFO(text);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x9b') == std::string::npos);
}

}  // namespace

TEST_CASE("report prints the recorded command line escaped") {
  TempDir dir;
  const std::string profile = dir.file("p.json.gz");
  auto r = run({fxprof_bin(), "record", "--cpu-only", "-q", "-s", "-o", profile, "--", "sh", "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", "x\x1b]52;c;aGk=\x07",
                "\xc2\x9b"
                "2J"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto rep = run({fxprof_bin(), "report", profile});
  INFO(rep.err);
  REQUIRE(rep.status == 0);
  CHECK(rep.out.find("x\\e]52;c;aGk=\\x07 \\u009b2J\n") != std::string::npos);
  check_no_escapes(rep.out);
  check_no_escapes(rep.err);
}

TEST_CASE("the warning for a library without symbols names it escaped") {
  TempDir dir;
  const std::string recorded = dir.file("r.json.gz");
  auto r = run({fxprof_bin(), "record", "--cpu-only", "-q", "-s", "--no-symbolicate", "-o", recorded, "--",
                test_program("exp_work"), "1"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The program's library renamed (its file then cannot be found): "exp<ESC>[2Jwork".
  std::string json = read_profile_text(recorded);
  size_t n = 0;
  for (size_t at = 0; (at = json.find("exp_work", at)) != std::string::npos; ++n)
    json.replace(at, 8, "exp\\u001b[2Jwork");
  REQUIRE(n > 0);
  const std::string hostile = dir.file("hostile.json");
  {
    auto f = fxprof::AtomicFile::create(hostile);
    REQUIRE(f);
    REQUIRE(::write(f->fd(), json.data(), json.size()) == static_cast<ssize_t>(json.size()));
    REQUIRE(f->commit());
  }
  // HOME without perf's build-ID cache (~/.debug: perf record of exp_work in the import tests put a copy there).
  CmdOptions o;
  o.env["HOME"] = dir.path();
  auto rep = run({fxprof_bin(), "report", hostile}, o);
  INFO(rep.err);
  CHECK(rep.status == 0);
  CHECK(rep.err.find("fxprof: warning: no symbols for exp\\e[2Jwork: ") != std::string::npos);
  check_no_escapes(rep.err);
  check_no_escapes(rep.out);
}
