// Tests of server/api_symbolicate_v5.cpp: the request shapes the Firefox Profiler sends, its refusals, and
// answers checked against binutils' view of the test programs (tests/programs/symbolizer).
#include <catch2/catch.hpp>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "tests/server/api_support.h"

using namespace fxprof::test::api;
using fxprof::test::run;
using fxprof::test::test_program;

TEST_CASE("api: /symbolicate/v5 answers requests shaped as the front end sends them") {
  Prog p = prog(test_program("sym_inline"));
  auto syms = nm_symbols(p.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  const NmSym main_fn = syms.at("main");
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  // Job 0: 10,000 addresses of this lib (compute_hot and main, every byte, over and over; callers nudged by
  // -1).
  std::vector<uint64_t> addrs;
  for (size_t i = 0; addrs.size() < 10000; ++i) {
    addrs.push_back(hot.addr + i % hot.size);
    addrs.push_back(main_fn.addr + i % main_fn.size);
  }
  std::string req = R"({"jobs":[{"memoryMap":[["sym_inline",")" + p.breakpad + R"("]],"stacks":[[)";
  for (size_t i = 0; i < addrs.size(); ++i) req += (i ? ",[0," : "[0,") + std::to_string(addrs[i]) + "]";
  // Job 1: a lib nobody knows. Job 2: the same lib again, lowercase id.
  std::string lower = p.breakpad;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  req +=
      R"(]]},{"memoryMap":[["libnothere.so","0123456789ABCDEF0123456789ABCDEF0"]],"stacks":[[[0,4096],[0,17]]]},)";
  req += R"({"memoryMap":[["sym_inline",")" + lower + R"("]],"stacks":[[[0,)" + std::to_string(hot.addr) +
         "]]]}]}";
  auto resp = fxprof::server::symbolicate_v5(s, req);
  REQUIRE(resp.http_status == 200);
  simdjson::dom::parser parser;
  auto root = parse(parser, resp.body);
  simdjson::dom::array results = root["results"];
  REQUIRE(results.size() == 3);

  auto r0 = results.at(0);
  CHECK(bool(r0["found_modules"]["sym_inline/" + p.breakpad]) == true);
  CHECK(r0["module_errors"].error() == simdjson::NO_SUCH_FIELD);
  simdjson::dom::array frames = r0["stacks"].at(0);
  REQUIRE(frames.size() == addrs.size());
  size_t i = 0;
  for (auto f : frames) {
    INFO("frame " << i);
    REQUIRE(uint64_t(f["frame"]) == i);
    REQUIRE(std::string_view(f["module_offset"]) == hex(addrs[i]));
    REQUIRE(std::string_view(f["module"]) == "sym_inline");
    bool is_hot = addrs[i] >= hot.addr && addrs[i] < hot.addr + hot.size;
    const NmSym& fn = is_hot ? hot : main_fn;
    REQUIRE(std::string_view(f["function"]) == (is_hot ? "compute_hot(int)" : "main"));
    REQUIRE(std::string_view(f["function_offset"]) == hex(addrs[i] - fn.addr));
    REQUIRE(std::string_view(f["function_size"]) == hex(fn.size));
    REQUIRE(ends_with(std::string(std::string_view(f["file"])), "sym_inline.cpp"));
    REQUIRE(uint64_t(f["line"]) > 0);
    if (f["inlines"].error() == simdjson::SUCCESS) {
      for (auto in : simdjson::dom::array(f["inlines"])) {
        REQUIRE(in["function"].error() == simdjson::SUCCESS);
        REQUIRE(uint64_t(in["line"]) > 0);
      }
    }
    ++i;
  }

  auto r1 = results.at(1);
  std::string missing = "libnothere.so/0123456789ABCDEF0123456789ABCDEF0";
  CHECK(bool(r1["found_modules"][missing]) == false);
  CHECK(r1["module_errors"][missing].at(0)["message"].is_string());
  simdjson::dom::array f1 = r1["stacks"].at(0);
  REQUIRE(f1.size() == 2);
  CHECK(std::string_view(f1.at(1)["module_offset"]) == "0x11");
  CHECK(f1.at(1)["function"].error() == simdjson::NO_SUCH_FIELD);

  auto r2 = results.at(2);
  CHECK(bool(r2["found_modules"]["sym_inline/" + lower]) == true);
  CHECK(std::string_view(r2["stacks"].at(0).at(0)["function"]) == "compute_hot(int)");
}

TEST_CASE("api: /symbolicate/v5: a rebuilt binary is a module error, its frames unnamed") {
  Prog original = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, test_program("sym_inline_rebuilt")));
  auto syms = nm_symbols(original.path);
  uint64_t hot = syms.at("_Z11compute_hoti").addr;
  std::string req = R"({"jobs":[{"memoryMap":[["sym_inline",")" + original.breakpad +
                    R"("]],"stacks":[[[0,)" + std::to_string(hot) + "]]]}]}";
  auto resp = fxprof::server::symbolicate_v5(s, req);
  REQUIRE(resp.http_status == 200);
  simdjson::dom::parser parser;
  auto root = parse(parser, resp.body);
  auto result = root["results"].at(0);
  std::string key = "sym_inline/" + original.breakpad;
  CHECK(bool(result["found_modules"][key]) == false);
  CHECK(std::string_view(result["module_errors"][key].at(0)["message"]).find("build ID") !=
        std::string_view::npos);
  auto frame = result["stacks"].at(0).at(0);
  CHECK(frame["function"].error() == simdjson::NO_SUCH_FIELD);
  CHECK(std::string_view(frame["module_offset"]) == hex(hot));
  CHECK(std::string_view(frame["module"]) == "sym_inline");
}

TEST_CASE("api: /symbolicate/v5: a stripped binary's frames are named by their FDE, one name a function") {
  Prog original = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(original, test_program("symbolizer/buildid/sym_stripped")));
  auto syms = nm_symbols(original.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  const NmSym main_fn = syms.at("main");
  const uint64_t addrs[] = {hot.addr + 1, hot.addr + hot.size - 2, main_fn.addr + 7};
  std::string req = R"({"jobs":[{"memoryMap":[["sym_inline",")" + original.breakpad + R"("]],"stacks":[[)";
  for (size_t i = 0; i < std::size(addrs); ++i) req += (i ? ",[0," : "[0,") + std::to_string(addrs[i]) + "]";
  req += "]]}]}";
  auto resp = fxprof::server::symbolicate_v5(s, req);
  REQUIRE(resp.http_status == 200);
  simdjson::dom::parser parser;
  auto root = parse(parser, resp.body);
  auto result = root["results"].at(0);
  CHECK(bool(result["found_modules"]["sym_inline/" + original.breakpad]) == true);
  simdjson::dom::array frames = result["stacks"].at(0);
  REQUIRE(frames.size() == 3);
  // function: "binary+0x<FDE start>", the one spelling of an unnamed function in every view; function_offset
  // from it, so the two addresses of compute_hot are one function.
  for (size_t i = 0; i < 2; ++i) {
    auto f = frames.at(i);
    CHECK(std::string_view(f["function"]) == "sym_inline+" + hex(hot.addr));
    CHECK(std::string_view(f["function_offset"]) == hex(addrs[i] - hot.addr));
    CHECK(std::string_view(f["function_size"]) == hex(hot.size));
    CHECK(f["file"].error() == simdjson::NO_SUCH_FIELD);
  }
  CHECK(std::string_view(frames.at(2)["function"]) == "sym_inline+" + hex(main_fn.addr));
  CHECK(std::string_view(frames.at(2)["function_offset"]) == "0x7");
  CHECK(std::string_view(frames.at(2)["function_size"]) == hex(main_fn.size));
}

TEST_CASE("api: /symbolicate/v5: malformed requests get 400 and an error object, never a crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  std::string mm = R"({"memoryMap":[["sym_inline",")" + p.breakpad + R"("]],)";
  std::vector<std::string> bad = {
      "",
      "not json",
      "{",
      R"({"jobs":[)",
      "[]",
      "{}",
      "null",
      R"({"foo":1})",
      R"({"jobs":5})",
      R"({"jobs":[5]})",
      R"({"jobs":[{}]})",
      R"({"jobs":[{"memoryMap":[["a"]],"stacks":[]}]})",
      R"({"jobs":[{"memoryMap":[[1,2]],"stacks":[]}]})",
      R"({"jobs":[{"memoryMap":"x","stacks":[]}]})",
      "{\"jobs\":[" + mm + R"("stacks":5}]})",
      "{\"jobs\":[" + mm + R"("stacks":[5]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[5]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[[0]]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[[0,"0x10"]]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[[0,-1]]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[[0,1.5]]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[[0,1e30]]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[[0,99999999999999999999999999999]]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[[7,16]]]}]})",
      "{\"jobs\":[" + mm + R"("stacks":[[["0",16]]]}]})",
      std::string(100000, '[') + std::string(100000, ']'),
      std::string("{\"jobs\":[\0]}", 12),
  };
  for (const auto& body : bad) {
    INFO("request: " << body.substr(0, 120));
    auto r = fxprof::server::symbolicate_v5(s, body);
    CHECK(r.http_status == 400);
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    REQUIRE(parser.parse(simdjson::padded_string(r.body)).get(root) == simdjson::SUCCESS);
    CHECK(root["error"].is_string());
  }
}

TEST_CASE("api: /symbolicate/v5: concurrent requests agree, with or without eviction") {
  Prog p = prog(test_program("sym_inline"));
  Prog other = prog(test_program("sym_inline_rebuilt"));
  auto syms = nm_symbols(p.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  auto make_request = [&](const std::string& name, const Prog& pr) {
    std::string req = R"({"jobs":[{"memoryMap":[[")" + name + R"(",")" + pr.breakpad + R"("]],"stacks":[[)";
    for (uint64_t a = 0; a < hot.size; ++a) req += (a ? ",[0," : "[0,") + std::to_string(hot.addr + a) + "]";
    return req + "]]}]}";
  };
  const std::string req[2] = {make_request("sym_inline", p), make_request("rebuilt", other)};
  for (size_t limit : {size_t{1} << 30, size_t{1}}) {  // the second: every use evicts the other library
    sym::Options o = no_system_debug();
    o.cache_limit_bytes = limit;
    sym::Symbolizer s(o);
    s.add_known_lib(known(p, p.path));
    s.add_known_lib(known(other, other.path, "rebuilt"));
    std::vector<std::string> out(8);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < out.size(); ++t)
      threads.emplace_back([&, t] {
        for (int k = 0; k < 5; ++k) out[t] = fxprof::server::symbolicate_v5(s, req[t % 2]).body;
      });
    for (auto& t : threads) t.join();
    for (size_t t = 0; t < out.size(); ++t) CHECK(out[t] == out[t % 2]);
    CHECK(out[0].find("\"function\":\"compute_hot(int)\"") != std::string::npos);
    CHECK(out[1].find("\"function\":\"compute_hot(int)\"") != std::string::npos);
    CHECK(out[0].find("\"inlines\"") != std::string::npos);
  }
}

TEST_CASE("api: /symbolicate/v5: truncated, empty and non-ELF files answer 200 with unnamed frames") {
  Prog original = prog(test_program("sym_inline"));
  fxprof::test::TempDir dir;
  auto original_bytes = fxprof::read_file(original.path);
  REQUIRE(original_bytes.ok());
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"empty", ""},
           {"text", "hello\n"},
           {"truncated", original_bytes->substr(0, original_bytes->size() / 3)}}) {
    INFO(name);
    {
      std::ofstream out(dir.file(name), std::ios::binary);
      out << bytes;
    }
    sym::Symbolizer s(no_system_debug());
    s.add_known_lib(known(original, dir.file(name)));
    auto v5 = fxprof::server::symbolicate_v5(s, R"({"jobs":[{"memoryMap":[["sym_inline",")" +
                                                    original.breakpad + R"("]],"stacks":[[[0,4096]]]}]})");
    CHECK(v5.http_status == 200);
    CHECK(v5.body.find("\"function\"") == std::string::npos);
  }
}

TEST_CASE("api: /symbolicate/v5: mutated requests never crash") {
  Prog p = prog(test_program("sym_inline"));
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, p.path));
  check_mutations(R"({"jobs":[{"memoryMap":[["sym_inline",")" + p.breakpad +
                      R"("]],"stacks":[[[0,4560],[0,4576],[0,4097]]]}]})",
                  [&](const std::string& req) { return fxprof::server::symbolicate_v5(s, req); }, 7);
}
