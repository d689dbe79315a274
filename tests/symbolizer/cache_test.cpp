// Tests of symbolizer/cache.cpp: one load per library under concurrent use, and eviction by bytes.
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/sym_programs.h"

using namespace fxprof::test::sym_programs;
using fxprof::test::run;
using fxprof::test::test_program;

TEST_CASE("cache: concurrent requests share one load per library and agree, with or without eviction") {
  Prog p = prog(test_program("sym_inline"));
  Prog other = prog(test_program("sym_inline_rebuilt"));
  auto syms = nm_symbols(p.path);
  const NmSym hot = syms.at("_Z11compute_hoti");
  std::vector<uint64_t> addrs;
  for (uint64_t a = 0; a < hot.size; ++a) addrs.push_back(hot.addr + a);
  // Everything a lookup answers, as one string to compare (no Catch assertion here: they run on several
  // threads, and Catch2 is not thread-safe; ThreadSanitizer says so).
  auto ask = [&](sym::Symbolizer& s, const std::string& name, const Prog& pr) -> std::string {
    auto r = s.lookup(name, pr.breakpad, addrs);
    if (!r.ok()) return "lookup failed: " + r.error();
    std::ostringstream out;
    for (const auto& i : *r) {
      out << i.found << ' ' << i.function << '+' << i.function_offset << '/' << i.function_size << ' '
          << i.file << ':' << i.line << " [";
      for (const auto& in : i.inlines) out << in.function << ' ' << in.file << ':' << in.line << ';';
      out << "]\n";
    }
    return out.str();
  };
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
        for (int k = 0; k < 5; ++k) out[t] = t % 2 == 0 ? ask(s, "sym_inline", p) : ask(s, "rebuilt", other);
      });
    for (auto& t : threads) t.join();
    for (size_t t = 0; t < out.size(); ++t) CHECK(out[t] == out[t % 2]);
    CHECK(out[0].rfind("lookup failed", 0) == std::string::npos);
    CHECK(out[1].rfind("lookup failed", 0) == std::string::npos);
    CHECK(out[0].find(" compute_hot(int)+") != std::string::npos);
    CHECK(out[1].find(" compute_hot(int)+") != std::string::npos);
    CHECK(out[0].find("[leaf_helper") != std::string::npos);
  }
}

TEST_CASE("cache: a library registered again as it was keeps what was loaded; a different entry drops it") {
  Prog p = prog(test_program("sym_inline"));
  const uint64_t hot = nm_symbols(p.path).at("_Z11compute_hoti").addr;
  fxprof::test::TempDir dir;
  const std::string copy = dir.file("sym_inline");
  REQUIRE(run({"cp", p.path, copy}).status == 0);
  sym::Symbolizer s(no_system_debug());
  s.add_known_lib(known(p, copy));
  auto first = s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{hot});
  REQUIRE(first.ok());
  REQUIRE((*first)[0].function == "compute_hot(int)");
  // The file is gone: only what was loaded can answer (record hands its symbolizer on to the server, and
  // registers its binaries again on each symbolication).
  std::filesystem::remove(copy);
  s.add_known_lib(known(p, copy));
  auto again = s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{hot});
  REQUIRE(again.ok());
  CHECK((*again)[0].function == "compute_hot(int)");
  // Another path for the same library is a new registration: the file is looked for again, and not found.
  s.add_known_lib(known(p, dir.file("elsewhere")));
  CHECK_FALSE(s.lookup("sym_inline", p.breakpad, std::vector<uint64_t>{hot}).ok());
}
