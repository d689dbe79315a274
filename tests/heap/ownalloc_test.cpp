// fxprof record --heap on a program with an allocator of its own (issue 36), checked against the truth the
// program prints: a static one, every entry point of the family recorded with uprobes (calloc, realloc as a
// free and an allocation, posix_memalign, aligned_alloc); mimalloc's API in libmimalloc.so, interposed.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "heap/heap.h"
#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

// The program's own truth against `report --heap --json`: the C libraries' few blocks (stdout's buffer,
// libstdc++'s emergency pool) at most `extra` blocks and `extra_bytes` beyond it; `freed_after`: blocks the
// program's runtime frees after it printed (Rust's exit cleanup), which the truth counts as leaked.
void check_against_truth(const std::string& out, const std::string& printed, uint64_t extra,
                         uint64_t extra_bytes, uint64_t freed_after = 0) {
  unsigned long allocations = 0, bytes = 0, frees = 0, leaked = 0, leaked_bytes = 0;
  REQUIRE(std::sscanf(printed.c_str(), "allocations %lu bytes %lu frees %lu leaked %lu blocks, %lu bytes",
                      &allocations, &bytes, &frees, &leaked, &leaked_bytes) == 5);
  auto rep = run({fxprof_bin(), "report", "--heap", "--json", out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  simdjson::dom::element heap = parse_json(parser, rep.out)["heap"];
  CHECK(uint64_t(heap["allocations"]) >= allocations);
  CHECK(uint64_t(heap["allocations"]) <= allocations + extra);
  CHECK(uint64_t(heap["frees"]) >= frees);
  CHECK(uint64_t(heap["frees"]) <= frees + extra);
  CHECK(uint64_t(heap["leakedBlocks"]) + freed_after >= leaked);
  CHECK(uint64_t(heap["leakedBlocks"]) <= leaked + extra);
  CHECK(uint64_t(heap["bytesAllocated"]) >= bytes);
  CHECK(uint64_t(heap["bytesAllocated"]) <= bytes + extra_bytes);
}

TEST_CASE("heap: an own allocator's calloc, realloc, posix_memalign and aligned_alloc are counted exactly",
          "[heap]") {
  REQUIRE(geteuid() == 0);  // uprobes
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  const std::string program = test_program("heap_ownalloc");
  auto r = record(out, {program, "family", "500"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  check_against_truth(out, r.out, 2, 4096 + 72704);
}

TEST_CASE("heap: mimalloc's own API from libmimalloc.so is counted exactly, interposed (no uprobes)",
          "[heap]") {
  // Before: 1,001 of 102,002 allocations (only what went through malloc). mi_realloc and posix_memalign call
  // mimalloc's other entry points through the PLT: each counted once.
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_mimalloc"), "2000"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("own allocator") == std::string::npos);  // not the uprobe path: interposed
  check_against_truth(out, r.out, 4, 4096 + 72704 + 4096);
}

TEST_CASE("heap: a Rust #[global_allocator] over its own arena is counted exactly, with uprobes", "[heap]") {
  // rustc >= 1.79 emits no __rg_alloc: its allocator is the __rust_alloc family (v0-mangled), and there is no
  // __rdl_alloc (the default allocator's). Before: 9 of its 2,135 allocations (the C libraries'), no line.
  REQUIRE(geteuid() == 0);  // uprobes
  TempDir dir;
  const std::string out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_rust_bump"), "300"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("recorded with uprobes where it is called (__r") != std::string::npos);
  check_against_truth(out, r.out, 12, 4096 + 72704 + 1024, 1);
}

TEST_CASE("heap: an optimised Rust #[global_allocator] over its own arena: the figures are said incomplete",
          "[heap]") {
  // Optimised, rustc inlines the allocator into the crate's own functions (Vec's growth, drops): those
  // allocations call nothing fxprof can probe. Before: a confident total of the C libraries' few blocks.
  REQUIRE(geteuid() == 0);
  TempDir dir;
  auto r = record(dir.file("p.json.gz"), {test_program("heap_rust_bump_opt"), "300"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("has a Rust #[global_allocator]") != std::string::npos);
  CHECK(r.err.find("the heap figures may be incomplete") != std::string::npos);
}

TEST_CASE("heap: a Rust #[global_allocator] that forwards to malloc counts each block once", "[heap]") {
  // Its __rust_alloc is probed (fxprof cannot tell from the symbols where it gets its memory) and its malloc
  // is the library's: the library leaves out what is allocated inside the probed functions (without that,
  // each block called through __rust_alloc counted twice).
  REQUIRE(geteuid() == 0);
  TempDir dir;
  for (const char* mode : {"--heap=full", "--heap=sampled"}) {
    INFO(mode);
    const std::string out = dir.file(std::string("p") + (mode[7] == 'f' ? "f" : "s") + ".json.gz");
    auto r = record(out, {test_program("heap_rust_system"), "300"}, {mode, "--heap-rate", "1"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    // --heap-rate 1 samples every block (weight 1): the sampled path counts exactly too.
    check_against_truth(out, r.out, 12, 4096 + 72704 + 1024, 1);
  }
}

TEST_CASE("heap: Rust allocator families: the default allocator is malloc's, a global one is probed",
          "[heap]") {
  const heap::OwnAllocator system = heap::own_allocator(test_program("heap_rust_system"));
  CHECK(system.rust);
  REQUIRE(system.functions.size() == 3);  // __rust_alloc, __rust_alloc_zeroed, __rust_realloc (or __rg_)
  CHECK(heap::allocator_role(system.functions[0]) != heap::AllocatorRole::Other);
  CHECK(system.frees.size() == 1);
  CHECK(system.code.size() == 4);
  CHECK(heap::own_allocator_line("p", system).find("may be incomplete") != std::string::npos);
  const heap::OwnAllocator plain = heap::own_allocator(test_program("heap_rust"));  // __rdl_alloc
  CHECK_FALSE(plain.rust);
  CHECK(plain.functions.empty());
}

}  // namespace
}  // namespace fxprof::test
