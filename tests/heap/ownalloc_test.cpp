// fxprof record --heap on a program with an allocator of its own (issue 36): every entry point of the family
// recorded with uprobes (calloc, realloc as a free and an allocation, posix_memalign, aligned_alloc), checked
// against the truth the program prints.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

TEST_CASE("heap: an own allocator's calloc, realloc, posix_memalign and aligned_alloc are counted exactly",
          "[heap]") {
  REQUIRE(geteuid() == 0);  // uprobes
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  const std::string program = test_program("heap_ownalloc");
  auto r = record(out, {program, "family", "500"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  unsigned long allocations = 0, bytes = 0, frees = 0, leaked = 0, leaked_bytes = 0;
  REQUIRE(std::sscanf(r.out.c_str(), "allocations %lu bytes %lu frees %lu leaked %lu blocks, %lu bytes",
                      &allocations, &bytes, &frees, &leaked, &leaked_bytes) == 5);
  auto rep = run({fxprof_bin(), "report", "--heap", "--json", out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element heap = parse_json(parser, rep.out)["heap"];
  // The program's own blocks, plus what the C libraries allocated for it (stdout's buffer, libstdc++'s
  // emergency pool: a block each).
  const auto got_allocations = uint64_t(heap["allocations"]);
  CHECK(got_allocations >= allocations);
  CHECK(got_allocations <= allocations + 2);
  CHECK(uint64_t(heap["frees"]) >= frees);
  CHECK(uint64_t(heap["frees"]) <= frees + 2);
  const auto got_leaked = uint64_t(heap["leakedBlocks"]);
  CHECK(got_leaked >= leaked);
  CHECK(got_leaked <= leaked + 2);
  const auto got_bytes = uint64_t(heap["bytesAllocated"]);
  CHECK(got_bytes >= bytes);
  CHECK(got_bytes <= bytes + 4096 + 72704);  // stdout's buffer, libstdc++'s emergency pool
}

}  // namespace
}  // namespace fxprof::test
