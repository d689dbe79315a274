// The heap through the sink commands with --suppress FUNC (report --heap, export folded --heap, diff --heap)
// and the heap diff and its gate, on --heap=full recordings of heap_prog, whose figures are known exactly.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

// `heap_prog leak N 1000` with --heap=full: leak_blocks() leaks N x 1000 bytes.
std::string record_leak(TempDir& dir, const std::string& name, int blocks) {
  const std::string prof = dir.file(name);
  auto r = record(prof, {test_program("heap_prog"), "leak", std::to_string(blocks), "1000"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  return prof;
}

TEST_CASE("heap --suppress FUNC: left out of report --heap and export folded --heap, and counted", "[heap]") {
  TempDir dir;
  const std::string prof = record_leak(dir, "a.json.gz", 50);
  simdjson::dom::parser p1, p2;
  auto whole = run({fxprof_bin(), "report", "--heap", "--json", prof});
  REQUIRE(whole.status == 0);
  auto cut = run({fxprof_bin(), "report", "--heap", "--json", "--suppress", "leak_blocks", prof});
  INFO(cut.err);
  REQUIRE(cut.status == 0);
  simdjson::dom::element all = parse_json(p1, whole.out)["heap"], heap = parse_json(p2, cut.out)["heap"];
  CHECK(cut.err.find("--suppress left out 50 allocations (48.8 KiB) whose stack contains leak_blocks") !=
        std::string::npos);
  CHECK(uint64_t(heap["suppressedAllocations"]) == 50);
  CHECK(int64_t(heap["suppressedBytes"]) == 50000);
  CHECK(int64_t(all["leakedBytes"]) - int64_t(heap["leakedBytes"]) == 50000);
  CHECK(int64_t(all["bytesAllocated"]) - int64_t(heap["bytesAllocated"]) == 50000);
  CHECK(uint64_t(all["allocations"]) - uint64_t(heap["allocations"]) == 50);
  for (simdjson::dom::element s : simdjson::dom::array(heap["topLeakSites"]))
    CHECK(std::string_view(s["name"]).find("leak_blocks") == std::string_view::npos);
  // The text says it too; churn suppressed as well (two names).
  auto text =
      run({fxprof_bin(), "report", "--heap", "--suppress", "leak_blocks", "--suppress", "churn", prof});
  REQUIRE(text.status == 0);
  CHECK(text.out.find(
            "suppressed:       1050 allocations (111.3 KiB) whose stack contains leak_blocks, churn") !=
        std::string::npos);

  // export folded --heap leaked: no line through leak_blocks, and the sum is the suppressed report's.
  auto folded = run(
      {fxprof_bin(), "export", "folded", "--heap", "leaked", "--suppress", "leak_blocks", prof, "-o", "-"});
  INFO(folded.err);
  REQUIRE(folded.status == 0);
  CHECK(folded.out.find("leak_blocks") == std::string::npos);
  int64_t sum = 0;
  std::istringstream in(folded.out);
  for (std::string line; std::getline(in, line);) sum += std::stoll(line.substr(line.rfind(' ') + 1));
  CHECK(sum == int64_t(heap["leakedBytes"]));

  // A name no stack has is said; --suppress without --heap is a usage error.
  auto typo = run({fxprof_bin(), "report", "--heap", "--suppress", "leak_blockz", prof});
  CHECK(typo.status == 0);
  CHECK(typo.err.find(
            "left out 0 allocations (0 B) whose stack contains leak_blockz (no allocation stack has it") !=
        std::string::npos);
  CHECK(run({fxprof_bin(), "report", "--suppress", "leak_blocks", prof}).status == 2);
  CHECK(run({fxprof_bin(), "export", "folded", "--suppress", "leak_blocks", prof, "-o", "-"}).status == 2);
  CHECK(run({fxprof_bin(), "diff", "--suppress", "leak_blocks", prof, prof}).status == 2);
}

TEST_CASE("diff --heap: bytes and blocks allocated and leaked per site, old and new, and a gate on bytes",
          "[heap]") {
  TempDir dir;
  const std::string a = record_leak(dir, "a.json.gz", 50), b = record_leak(dir, "b.json.gz", 80);
  auto d = run({fxprof_bin(), "diff", "--heap", a, b});
  INFO(d.out << d.err);
  REQUIRE(d.status == 0);
  // The first row is the site that changed: 50 -> 80 blocks, 48.8 -> 78.1 KiB allocated and leaked.
  std::istringstream in(d.out);
  std::string headline, header, first;
  std::getline(in, headline);
  std::getline(in, header);
  std::getline(in, first);
  CHECK(headline.find("leaked ") != std::string::npos);
  CHECK(first.find("leak_blocks (heap_prog)") != std::string::npos);
  CHECK(first.find("48.8 KiB") != std::string::npos);
  CHECK(first.find("78.1 KiB") != std::string::npos);
  CHECK(first.find("+29.3 KiB") != std::string::npos);
  CHECK(first.find("50 -> 80") != std::string::npos);
  CHECK(d.out.find("churn (heap_prog)") != std::string::npos);  // unchanged rows are listed too

  // The gate: 30,000 more bytes leaked and allocated is 2.4% of the base's ~1.19 MB allocated.
  auto fail = run({fxprof_bin(), "diff", "--heap", "--fail-above", "1", a, b});
  CHECK(fail.status == 3);
  CHECK(fail.out.find("gate failed: leak_blocks (heap_prog) bytes leaked grew 29.3 KiB (limit 11.6 KiB: "
                      "1.00% of the base") != std::string::npos);
  auto pass = run({fxprof_bin(), "diff", "--heap", "--fail-above", "5", a, b});
  CHECK(pass.status == 0);
  CHECK(pass.out.find("gate passed") != std::string::npos);
  CHECK(run({fxprof_bin(), "diff", "--heap", "--fail-above", "1", "--function", "churn", a, b}).status == 0);
  // The growth suppressed: the gate passes.
  auto suppressed =
      run({fxprof_bin(), "diff", "--heap", "--fail-above", "1", "--suppress", "leak_blocks", a, b});
  INFO(suppressed.out << suppressed.err);
  CHECK(suppressed.status == 0);
  CHECK(suppressed.out.find("leak_blocks") == std::string::npos);

  // A profile without heap data, and what --heap does not go with.
  auto cpu = dir.file("cpu.json.gz");
  REQUIRE(record(cpu, {test_program("heap_prog"), "leak", "1", "10"}).status == 0);
  auto none = run({fxprof_bin(), "diff", "--heap", a, cpu});
  CHECK(none.status == 1);
  CHECK(none.err.find("has no heap data") != std::string::npos);
  CHECK(run({fxprof_bin(), "diff", "--heap", "--serve", a, b}).status == 2);
  CHECK(run({fxprof_bin(), "diff", "--heap", a, a, "--", b}).status == 2);
}

}  // namespace
}  // namespace fxprof::test
