// Tests of server/api_asm_v1.cpp: the request shapes the Firefox Profiler sends, its refusals, and answers
// checked against binutils' view of the test programs (tests/programs/symbolizer).
#include <catch2/catch.hpp>

#include "tests/server/api_support.h"

using namespace fxprof::test::api;
using fxprof::test::test_program;

TEST_CASE("api: /asm/v1 disassembles a known function in Intel syntax") {
  Prog p = prog(test_program("sym_inline"));
  auto syms = nm_symbols(p.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  // objdump's instruction count for the same function, for comparison.
  const size_t expected = objdump_instruction_count(p.path, hot.addr, hot.size);
  REQUIRE(expected > 5);

  for (bool until_end : {false, true}) {
    std::string req = R"({"debugName":"sym_inline","debugId":")" + p.breakpad +
                      R"(","name":"sym_inline","codeId":")" + p.code_id + R"(","startAddress":")" +
                      hex(hot.addr) + R"(","size":")" + hex(until_end ? 1 : hot.size) +
                      R"(","continueUntilFunctionEnd":)" + (until_end ? "true" : "false") + "}";
    auto r = fxprof::server::asm_v1(s, req);
    REQUIRE(r.http_status == 200);
    simdjson::dom::parser parser;
    auto root = parse(parser, r.body);
    CHECK(std::string_view(root["startAddress"]) == hex(hot.addr));
    CHECK(std::string_view(root["size"]) == hex(hot.size));
    CHECK(std::string_view(root["arch"]) == "x86_64");
    CHECK(std::string_view(root["syntax"].at(0)) == "Intel");
    simdjson::dom::array ins = root["instructions"];
    CHECK(ins.size() == expected);
    uint64_t prev = 0;
    bool first = true, saw_ret = false;
    for (auto i : ins) {
      uint64_t off = i.at(0);
      if (first) CHECK(off == 0);
      if (!first) CHECK(off > prev);
      CHECK(off < hot.size);
      std::string_view text = i.at(1);
      if (text.rfind("ret", 0) == 0) saw_ret = true;
      CHECK(text.find("%") == std::string_view::npos);  // Intel, not AT&T
      prev = off;
      first = false;
    }
    CHECK(saw_ret);
  }
}

TEST_CASE("api: /asm/v1: continueUntilFunctionEnd in a stripped binary goes to the end of the FDE") {
  Prog p = prog(test_program("sym_inline"));
  std::string stripped = test_program("symbolizer/buildid/sym_stripped");
  const NmSym hot = nm_symbols(p.path).at("_Z11compute_hoti");
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, stripped));
  const size_t expected = objdump_instruction_count(p.path, hot.addr, hot.size);
  REQUIRE(expected > 5);
  // What /symbolicate/v5 names the function: its FDE's start and size.
  auto names = s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{hot.addr + 3});
  REQUIRE(names.ok());
  REQUIRE((*names)[0].found);
  CHECK((*names)[0].function == "sym_inline+" + hex(hot.addr));
  CHECK((*names)[0].function_size == hot.size);
  for (bool until_end : {false, true}) {
    std::string req = R"({"debugName":"sym_inline","debugId":")" + p.breakpad + R"(","startAddress":")" +
                      hex(hot.addr) + R"(","size":"0x1","continueUntilFunctionEnd":)" +
                      (until_end ? "true" : "false") + "}";
    auto r = fxprof::server::asm_v1(s, req);
    REQUIRE(r.http_status == 200);
    simdjson::dom::parser parser;
    auto root = parse(parser, r.body);
    simdjson::dom::array ins = root["instructions"];
    if (!until_end) {
      CHECK(std::string_view(root["size"]) == "0x1");
      continue;
    }
    CHECK(std::string_view(root["size"]) == hex(hot.size));
    CHECK(ins.size() == expected);
    std::string_view last = ins.at(ins.size() - 1).at(1);
    CHECK(last.rfind("ret", 0) == 0);
  }
}

TEST_CASE("api: /asm/v1: malformed requests get 400 and an error object, never a crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  for (
      const auto& body :
      {std::string(""), std::string("[]"), std::string(R"({"debugName":"a"})"),
       std::string(R"({"debugName":"a","debugId":"b","startAddress":"0x10","size":"0xffffffffffffffffff"})"),
       std::string(
           R"({"debugName":"a","debugId":"b","startAddress":"0x10","size":"0x10","continueUntilFunctionEnd":1})")}) {
    CHECK(fxprof::server::asm_v1(s, body).http_status == 400);
  }
}

TEST_CASE("api: /asm/v1: mutated requests never crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  check_mutations(R"({"debugName":"sym_inline","debugId":")" + p.breakpad +
                      R"(","startAddress":"0x11d0","size":"0x20","continueUntilFunctionEnd":true})",
                  [&](const std::string& req) { return fxprof::server::asm_v1(s, req); }, 9);
}
