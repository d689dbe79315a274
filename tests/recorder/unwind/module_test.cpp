// Binaries as the unwinder sees them: real test programs' .eh_frame_hdr tables, .debug_frame in the binary
// and in a separate debug file (found by .gnu_debuglink, CRC checked, or in --symbol-dir folders), our own
// vDSO, and files that are not ELF.
#include "recorder/unwind/module.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/recorder/unwind/capture.h"
#include "tests/support/support.h"

using namespace fxprof::recorder::unw;
using fxprof::unwind_test::Symbolizer;

namespace {
const std::string kDir = FXPROF_TEST_PROGRAMS_DIR;
}

TEST_CASE("module: .eh_frame_hdr's table finds the FDE of every function of a program", "[unwind][module]") {
  Module m;
  open_module(m, kDir + "/unw_prog");
  REQUIRE(m.ok);
  CHECK(!m.loads.empty());
  CHECK(m.table != nullptr);  // searched in place
  CHECK(m.table_count > 10);
  CHECK(m.identity.build_id.size() == 20);
  for (const char* fn : {"main", "recurse", "recurse_leaf", "compare_slow", "sig_victim"}) {
    auto range = Symbolizer::symbol_range(kDir + "/unw_prog", fn);
    REQUIRE(range.ok());
    INFO(fn);
    Fde f;
    for (uint64_t a : {range->first, (range->first + range->second) / 2, range->second - 1}) {
      REQUIRE(find_eh_fde(m, a, f) == FdeLookup::Found);
      CHECK(f.pc_begin <= range->first);
      CHECK(f.pc_end >= range->second);
    }
    fxprof::recorder::UnwindStats stats;
    CHECK(compute_rule(m, range->first, range->first, stats).kind == Rule::Cfa);
  }
}

TEST_CASE("module: .debug_frame from the binary and from its separate debug file", "[unwind][module]") {
  for (const char* prog : {"unw_dbgframe", "unw_split"}) {
    INFO(prog);
    Module m;
    open_module(m, kDir + "/" + prog);
    REQUIRE(m.ok);
    auto range = Symbolizer::symbol_range(
        std::string(prog) == "unw_split" ? kDir + "/unw_split.debug" : kDir + "/" + prog, "nocfi_leaf");
    REQUIRE(range.ok());
    Fde f;
    CHECK(find_eh_fde(m, range->first, f) == FdeLookup::None);  // built without unwind tables
    CHECK(!m.debug_tried);                                      // nothing loaded until needed
    REQUIRE(find_debug_fde(m, range->first + 1, f));
    CHECK(m.debug_tried);
    CHECK(f.pc_begin == range->first);
    fxprof::recorder::UnwindStats stats;
    CHECK(compute_rule(m, range->first, range->first, stats).kind == Rule::Cfa);
    CHECK(stats.debug_frame_rules == 1);
  }
  Module fp;
  open_module(fp, kDir + "/unw_fp");  // no CFI at all for its own code: frame pointers
  REQUIRE(fp.ok);
  auto leaf = Symbolizer::symbol_range(kDir + "/unw_fp", "nocfi_leaf");
  REQUIRE(leaf.ok());
  fxprof::recorder::UnwindStats stats;
  CHECK(compute_rule(fp, leaf->first + 4, leaf->first + 4, stats).kind == Rule::FramePointer);
}

TEST_CASE("module: our own vDSO; files that are not ELF or do not exist", "[unwind][module]") {
  Module v;
  open_module(v, "[vdso]");
  CHECK(v.ok);
  CHECK(!v.loads.empty());
  Module none;
  open_module(none, "/nonexistent/lib.so");
  CHECK(!none.ok);
  Module text;
  open_module(text, std::string(FXPROF_SOURCE_DIR) + "/README.md");
  CHECK(!text.ok);
}

TEST_CASE("module: the separate debug file is CRC checked and found in --symbol-dir folders",
          "[unwind][module]") {
  using fxprof::test::run;
  fxprof::test::TempDir bin, syms;
  REQUIRE(run({"cp", kDir + "/unw_split", bin.file("unw_split")}).status == 0);
  auto range = Symbolizer::symbol_range(kDir + "/unw_split.debug", "nocfi_leaf");
  REQUIRE(range.ok());
  Fde f;
  {
    // Beside the binary, a debug file of the right name whose contents changed: refused (its CRC differs).
    REQUIRE(run({"cp", kDir + "/unw_split.debug", bin.file("unw_split.debug")}).status == 0);
    REQUIRE(run({"sh", "-c", "printf x >> " + bin.file("unw_split.debug")}).status == 0);
    Module m;
    open_module(m, bin.file("unw_split"));
    REQUIRE(m.ok);
    CHECK(!find_debug_fde(m, range->first + 1, f));
  }
  // The right debug file in a --symbol-dir folder.
  REQUIRE(run({"rm", bin.file("unw_split.debug")}).status == 0);
  REQUIRE(run({"cp", kDir + "/unw_split.debug", syms.file("unw_split.debug")}).status == 0);
  {
    Module m;
    open_module(m, bin.file("unw_split"));
    CHECK(!find_debug_fde(m, range->first + 1, f));  // not without the folder
  }
  fxprof::elf::LocatorOptions locator;
  locator.symbol_dirs = {syms.path()};
  Module m;
  m.locator = &locator;
  open_module(m, bin.file("unw_split"));
  REQUIRE(find_debug_fde(m, range->first + 1, f));
  CHECK(f.pc_begin == range->first);
}

TEST_CASE("module: bytes_at refuses ranges that wrap below 0 or run past a segment", "[unwind][module]") {
  // The return-address scan asks for the bytes before a candidate address: svma - 7 wraps when the address
  // is in the first bytes of the image, and must give nothing, not a pointer before the mapping.
  Module m;
  open_module(m, kDir + "/unw_prog");
  REQUIRE(m.ok);
  REQUIRE(!m.loads.empty());
  const auto& first = m.loads.front();
  for (uint64_t k = 1; k <= 7; ++k) CHECK(m.bytes_at(first.vaddr - k, 7) == nullptr);
  CHECK(m.bytes_at(first.vaddr, 7) != nullptr);
  CHECK(m.bytes_at(first.vaddr + first.filesz - 7, 7) != nullptr);
  CHECK(m.bytes_at(first.vaddr + first.filesz - 6, 7) == nullptr);
  CHECK(m.bytes_at(UINT64_MAX - 3, 7) == nullptr);
}
