// Tests of symbolizer/disassemble.cpp: instructions of a known function against objdump's count (the
// /asm/v1 answers are tested in tests/server/api_asm_v1_test.cpp).
#include <catch2/catch.hpp>
#include <string>

#include "tests/support/sym_programs.h"

using namespace fxprof::test::sym_programs;
using fxprof::test::test_program;

TEST_CASE("disassemble: a whole function from one byte, offsets increasing, Intel syntax") {
  Prog p = prog(test_program("sym_inline"));
  const NmSym hot = nm_symbols(p.path).at("_Z11compute_hoti");
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  // objdump's instruction count for the same function, for comparison.
  const size_t expected = objdump_instruction_count(p.path, hot.addr, hot.size);

  auto d = s.disassemble("sym_inline", p.breakpad, hot.addr, 1, true);
  REQUIRE(d.ok());
  CHECK(d.value().arch == "x86_64");
  CHECK(d.value().syntax == "Intel");
  CHECK(d.value().size == hot.size);
  REQUIRE(d.value().instructions.size() == expected);
  CHECK(d.value().instructions.front().first == 0);
  for (size_t i = 1; i < d.value().instructions.size(); ++i)
    CHECK(d.value().instructions[i].first > d.value().instructions[i - 1].first);
  // Without continuing to the function's end: just the bytes asked for.
  auto one = s.disassemble("sym_inline", p.breakpad, hot.addr, 1, false);
  REQUIRE(one.ok());
  CHECK(one.value().size == 1);

  auto unknown = s.disassemble("nope", "0123456789ABCDEF0123456789ABCDEF0", 0, 16, false);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.refusal().kind == sym::Refusal::kNotFound);
}
