// Tests of server/api_source_v1.cpp: the request shapes the Firefox Profiler sends, its refusals, and answers
// checked against binutils' view of the test programs (tests/programs/symbolizer).
#include <catch2/catch.hpp>

#include "tests/server/api_support.h"

using namespace fxprof::test::api;
using fxprof::test::run;
using fxprof::test::test_program;

TEST_CASE("api: /source/v1 serves only files the debug info refers to") {
  Prog p = prog(test_program("sym_inline"));
  auto syms = nm_symbols(p.path);
  uint64_t hot = syms.at("_Z11compute_hoti").addr;
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  auto info = s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{hot});
  REQUIRE(info.ok());
  std::string file = (*info)[0].file;
  REQUIRE(ends_with(file, "sym_inline.cpp"));
  auto request = [&](const std::string& f) {
    return R"({"debugName":"sym_inline","debugId":")" + p.breakpad + R"(","moduleOffset":")" + hex(hot) +
           R"(","file":")" + f + R"("})";
  };
  auto ok = fxprof::server::source_v1(s, request(file));
  REQUIRE(ok.http_status == 200);
  simdjson::dom::parser parser;
  auto root = parse(parser, ok.body);
  CHECK(std::string_view(root["source"]).find("int compute_hot(int x)") != std::string_view::npos);
  CHECK(std::string_view(root["file"]) == file);
  CHECK(root["symbolsLastModified"].is_null());
  CHECK(root["sourceLastModified"].is_null());

  std::string dir = file.substr(0, file.rfind('/'));
  for (const std::string& refused : {std::string("/etc/passwd"), dir + "/../../../../../../../etc/passwd",
                                     dir + "/../symbolizer/CMakeLists.txt", std::string("../../etc/passwd"),
                                     std::string("sym_inline.cpp"), dir + "/make_variants.sh"}) {
    INFO(refused);
    auto r = fxprof::server::source_v1(s, request(refused));
    CHECK(r.http_status == 403);
    CHECK(r.body.find("\"error\"") != std::string::npos);
    CHECK(r.body.find("root:") == std::string::npos);
  }
  // An unknown library: nothing to refer to.
  auto r = fxprof::server::source_v1(
      s, R"({"debugName":"nope","debugId":"0123456789ABCDEF0123456789ABCDEF0","moduleOffset":"0x0",)"
         R"("file":"/etc/passwd"})");
  CHECK(r.http_status == 404);
}

TEST_CASE("api: /source/v1: malformed requests get 400 and an error object, never a crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  for (const auto& body :
       {std::string(""), std::string("{"), std::string(R"({"debugName":5})"),
        std::string(R"({"debugName":"a","debugId":"b","moduleOffset":"zz","file":"/x"})")}) {
    CHECK(fxprof::server::source_v1(s, body).http_status == 400);
  }
}

TEST_CASE("api: /source/v1: mutated requests never crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  check_mutations(R"({"debugName":"sym_inline","debugId":")" + p.breakpad +
                      R"(","moduleOffset":"0x11d0","file":"/x.cpp"})",
                  [&](const std::string& req) { return fxprof::server::source_v1(s, req); }, 8);
}
