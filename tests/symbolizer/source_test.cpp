// Tests of symbolizer/source.cpp: the confinement rule of source() (the /source/v1 answers are tested in
// tests/server/api_source_v1_test.cpp).
#include <catch2/catch.hpp>
#include <string>

#include "tests/support/sym_programs.h"

using namespace fxprof::test::sym_programs;
using fxprof::test::test_program;

TEST_CASE("source: only absolute files the line table of that unit names, with a kind for each refusal") {
  Prog p = prog(test_program("sym_inline"));
  uint64_t hot = nm_symbols(p.path).at("_Z11compute_hoti").addr;
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  auto info = s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{hot});
  REQUIRE(info.ok());
  const std::string file = (*info)[0].file;
  REQUIRE(ends_with(file, "sym_inline.cpp"));

  auto ok = s.source("sym_inline", p.breakpad, hot, file);
  REQUIRE(ok.ok());
  CHECK(ok.value().find("int compute_hot(int x)") != std::string::npos);
  // The same file named through "." and ".." segments is the same file.
  std::string dir = file.substr(0, file.rfind('/'));
  std::string base = file.substr(file.rfind('/') + 1);
  CHECK(s.source("sym_inline", p.breakpad, hot, dir + "/./../" + dir.substr(dir.rfind('/') + 1) + "/" + base)
            .ok());

  auto relative = s.source("sym_inline", p.breakpad, hot, "sym_inline.cpp");
  REQUIRE_FALSE(relative.ok());
  CHECK(relative.refusal().kind == sym::Refusal::kForbidden);
  auto escape = s.source("sym_inline", p.breakpad, hot, dir + "/../../../../../../../etc/passwd");
  REQUIRE_FALSE(escape.ok());
  CHECK(escape.refusal().kind == sym::Refusal::kForbidden);
  CHECK(escape.refusal().message.find("does not refer to") != std::string::npos);
  auto unknown = s.source("nope", "0123456789ABCDEF0123456789ABCDEF0", 0, "/etc/passwd");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.refusal().kind == sym::Refusal::kNotFound);
}
