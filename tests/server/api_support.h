// Shared by the tests of the server's JSON APIs (api_*_test.cpp): the symbolizer test programs
// (tests/programs/symbolizer) as a symbolizer knows them, and binutils' view of their symbols.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "elf/elf.h"
#include "model/profile.h"
#include "server/server.h"
#include "symbolizer/symbolizer.h"
#include "tests/support/support.h"

namespace fxprof::test::api {

namespace sym = fxprof::symbolizer;

struct NmSym {
  uint64_t addr = 0;
  uint64_t size = 0;
};

// Defined symbols of a file by mangled name, as binutils' nm sees them.
inline std::map<std::string, NmSym> nm_symbols(const std::string& path) {
  auto r = run({"nm", "-S", "--defined-only", path});
  REQUIRE(r.status == 0);
  std::map<std::string, NmSym> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, b, c, d;
    ls >> a >> b >> c >> d;
    if (d.empty()) continue;  // no size
    out[d] = {std::stoull(a, nullptr, 16), std::stoull(b, nullptr, 16)};
  }
  return out;
}

struct Prog {
  std::string path;
  std::string breakpad;
  std::string code_id;
};

inline Prog prog(const std::string& path) {
  auto id = elf::read_file(path);
  REQUIRE(id);
  REQUIRE(!id->build_id.empty());
  return {path, model::breakpad_id_from_build_id(id->build_id), model::code_id_from_build_id(id->build_id)};
}

inline sym::KnownLib known(const Prog& p, const std::string& path,
                           const std::string& debug_name = "sym_inline") {
  sym::KnownLib k;
  k.debug_name = debug_name;
  k.name = debug_name;
  k.breakpad_id = p.breakpad;
  k.code_id = p.code_id;
  k.path = path;
  k.arch = "x86_64";
  return k;
}

inline sym::Options no_system_debug() {
  sym::Options o;
  o.debug_dirs = {};
  o.use_debuginfod = false;
  return o;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& text) {
  return parse_json(parser, text);
}

inline std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
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
