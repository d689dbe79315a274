// Shared by the tests of the server's JSON APIs (api_*_test.cpp): the symbolizer test programs
// (tests/support/sym_programs.h) and a request fuzzer.
#pragma once

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "server/server.h"
#include "tests/support/sym_programs.h"

namespace fxprof::test::api {

using namespace fxprof::test::sym_programs;

inline simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& text) {
  return parse_json(parser, text);
}

// Randomly mutated copies of a valid request never crash an API: every answer is 200 or 4xx, and JSON.
template <class Api>
void check_mutations(const std::string& valid, Api api, unsigned seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 500; ++i) {
    std::string req = valid;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
      size_t at = rng() % req.size();
      switch (rng() % 3) {
        case 0:
          req[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          req.erase(at, 1 + rng() % 8);
          break;
        default:
          req.insert(at, 1, "[]{}\",:0-9e"[rng() % 12]);
          break;
      }
      if (req.empty()) req = "x";
    }
    server::ApiResponse r = api(req);
    INFO(req);
    CHECK((r.http_status == 200 || (r.http_status >= 400 && r.http_status < 500)));
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    CHECK(parser.parse(simdjson::padded_string(r.body)).get(root) == simdjson::SUCCESS);
  }
}

}  // namespace fxprof::test::api
