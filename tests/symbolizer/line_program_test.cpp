// Tests of symbolizer/line_program.cpp: row-by-row agreement with libdw on real files, relative include
// directories joined with the compilation directory, and malformed operands rejected.
#include "symbolizer/line_program.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "symbolizer/elf_file.h"
#include "tests/support/support.h"

namespace sym = fxprof::symbolizer;

namespace {

// A DWARF 4 line program: include directory `dir`, file "a.c" in it, then `program`.
std::vector<uint8_t> dwarf4_unit(const std::string& dir, const std::vector<uint8_t>& program) {
  std::vector<uint8_t> header = {1, 1, 1, static_cast<uint8_t>(-5), 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1,
                                 0, 0, 1};
  for (char c : dir) header.push_back(static_cast<uint8_t>(c));
  header.push_back(0);
  header.push_back(0);  // end of include directories
  for (char c : std::string("a.c")) header.push_back(static_cast<uint8_t>(c));
  header.insert(header.end(), {0, 1, 0, 0});  // NUL, dir 1, mtime, length
  header.push_back(0);                        // end of files
  std::vector<uint8_t> unit = {4, 0};         // version
  uint32_t hl = static_cast<uint32_t>(header.size());
  unit.insert(unit.end(), reinterpret_cast<uint8_t*>(&hl), reinterpret_cast<uint8_t*>(&hl) + 4);
  unit.insert(unit.end(), header.begin(), header.end());
  unit.insert(unit.end(), program.begin(), program.end());
  uint32_t len = static_cast<uint32_t>(unit.size());
  std::vector<uint8_t> out(reinterpret_cast<uint8_t*>(&len), reinterpret_cast<uint8_t*>(&len) + 4);
  out.insert(out.end(), unit.begin(), unit.end());
  return out;
}

// set_address with an operand of `n` bytes, copy a row, end the sequence.
std::vector<uint8_t> program_with_address(size_t n) {
  std::vector<uint8_t> p = {0, static_cast<uint8_t>(n + 1), 2};
  for (size_t i = 0; i < n; ++i) p.push_back(static_cast<uint8_t>(0x10 + i));
  p.insert(p.end(), {1, 0, 1, 1});  // DW_LNS_copy, end_sequence
  return p;
}

}  // namespace

TEST_CASE("line program: relative include directories are joined with the compilation directory") {
  auto unit = dwarf4_unit("src", program_with_address(8));
  sym::LineSections sec{unit, {}, {}};
  std::deque<std::string> store;
  std::vector<const char*> files;
  std::vector<sym::DecodedRow> rows;
  REQUIRE(sym::decode_line_program(sec, 0, "/home/me/project", store, files, rows));
  REQUIRE(files.size() == 2);
  CHECK(std::string(files[1]) == "/home/me/project/src/a.c");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].addr == 0x1716151413121110);

  // Without an absolute compilation directory nothing can be joined: the name stays as written.
  REQUIRE(sym::decode_line_program(sec, 0, nullptr, store, files, rows));
  CHECK(std::string(files[1]) == "src/a.c");
  // An absolute include directory is kept.
  auto abs_unit = dwarf4_unit("/usr/include", program_with_address(8));
  sym::LineSections abs_sec{abs_unit, {}, {}};
  REQUIRE(sym::decode_line_program(abs_sec, 0, "/home/me/project", store, files, rows));
  CHECK(std::string(files[1]) == "/usr/include/a.c");
}

TEST_CASE("line program: an address operand longer than 8 bytes is rejected, not shifted past 64 bits") {
  for (size_t n : {9, 12, 16}) {
    INFO(n);
    auto unit = dwarf4_unit("src", program_with_address(n));
    sym::LineSections sec{unit, {}, {}};
    std::deque<std::string> store;
    std::vector<const char*> files;
    std::vector<sym::DecodedRow> rows;
    CHECK_FALSE(sym::decode_line_program(sec, 0, "/p", store, files, rows));
  }
  auto unit = dwarf4_unit("src", program_with_address(4));  // a 32-bit address is fine
  sym::LineSections sec{unit, {}, {}};
  std::deque<std::string> store;
  std::vector<const char*> files;
  std::vector<sym::DecodedRow> rows;
  REQUIRE(sym::decode_line_program(sec, 0, "/p", store, files, rows));
  CHECK(rows.at(0).addr == 0x13121110);
}

// The direct .debug_line decoder against libdw's dwarf_getsrclines, row by row, on every unit of several
// files: DWARF 5 (gcc), compressed sections, DWARF 4 (rustc), and this test binary itself (large C++).
TEST_CASE("line program: the line-program decoder agrees with libdw on every row") {
  std::vector<std::string> paths = {fxprof::test::test_program("sym_inline"),
                                    fxprof::test::test_program("sym_inline_gz"), "/proc/self/exe"};
  if (sym::ElfObject::open(fxprof::test::test_program("symbolizer/rust_v0")).ok())
    paths.push_back(fxprof::test::test_program("symbolizer/rust_v0"));
  for (const auto& path : paths) {
    INFO(path);
    auto obj = sym::ElfObject::open(path);
    REQUIRE(obj.ok());
    Dwarf* dw = dwarf_begin_elf((*obj)->elf(), DWARF_C_READ, nullptr);
    REQUIRE(dw != nullptr);
    sym::LineSections sec;
    Elf* elf = dwarf_getelf(dw);
    size_t shstrndx;
    REQUIRE(elf_getshdrstrndx(elf, &shstrndx) == 0);
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      REQUIRE(gelf_getshdr(scn, &sh) != nullptr);
      std::string name = elf_strptr(elf, shstrndx, sh.sh_name);
      std::span<const uint8_t>* target = name == ".debug_line"       ? &sec.line
                                         : name == ".debug_str"      ? &sec.str
                                         : name == ".debug_line_str" ? &sec.line_str
                                                                     : nullptr;
      if (target == nullptr) continue;
      if (sh.sh_flags & SHF_COMPRESSED) REQUIRE(elf_compress(scn, 0, 0) >= 0);
      Elf_Data* d = elf_getdata(scn, nullptr);
      *target = {static_cast<const uint8_t*>(d->d_buf), d->d_size};
    }
    REQUIRE(!sec.line.empty());
    using Row = std::tuple<uint64_t, bool, uint32_t, std::string>;
    // The test binary itself (the suite compiler's DWARF) has thousands of units: every 8th is enough, and
    // all of them take half a minute under the sanitizers.
    const size_t stride = path == "/proc/self/exe" ? 8 : 1;
    size_t units = 0, total = 0, compared = 0, seen = 0;
    Dwarf_CU* cu = nullptr;
    Dwarf_Half version;
    uint8_t unit_type;
    Dwarf_Die cudie, subdie;
    while (dwarf_get_units(dw, cu, &cu, &version, &unit_type, &cudie, &subdie) == 0) {
      Dwarf_Attribute a;
      Dwarf_Word off;
      if (dwarf_attr(&cudie, DW_AT_stmt_list, &a) == nullptr || dwarf_formudata(&a, &off) != 0) continue;
      if (seen++ % stride != 0) continue;
      const char* comp_dir = dwarf_attr(&cudie, DW_AT_comp_dir, &a) ? dwarf_formstring(&a) : nullptr;
      std::deque<std::string> store;
      std::vector<const char*> files;
      std::vector<sym::DecodedRow> rows;
      REQUIRE(sym::decode_line_program(sec, off, comp_dir, store, files, rows));
      std::vector<Row> mine, theirs;
      for (const auto& r : rows)
        mine.emplace_back(r.addr, r.end, r.line, r.file < files.size() && files[r.file] ? files[r.file] : "");
      Dwarf_Lines* lines;
      size_t n;
      REQUIRE(dwarf_getsrclines(&cudie, &lines, &n) == 0);
      for (size_t i = 0; i < n; ++i) {
        Dwarf_Line* l = dwarf_onesrcline(lines, i);
        Dwarf_Addr addr;
        int line;
        bool end;
        dwarf_lineaddr(l, &addr);
        dwarf_lineno(l, &line);
        dwarf_lineendsequence(l, &end);
        const char* f = dwarf_linesrc(l, nullptr, nullptr);
        theirs.emplace_back(addr, end, static_cast<uint32_t>(line),
                            f ? sym::absolute_source_path(f, comp_dir) : "");
      }
      // Compare what matters: the (file, line) every address resolves to, with rows sorted the way DwarfIndex
      // sorts them. Sequence end addresses are left out: rows there cover no byte (the decoder marks them
      // ended, libdw sometimes keeps one) and the next unit answers for that address.
      auto order = [](const Row& x, const Row& y) {
        if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) < std::get<0>(y);
        return std::get<1>(x) > std::get<1>(y);
      };
      std::stable_sort(mine.begin(), mine.end(), order);
      std::stable_sort(theirs.begin(), theirs.end(), order);
      std::set<uint64_t> ends;
      for (const auto* v : {&mine, &theirs})
        for (const Row& r : *v)
          if (std::get<1>(r)) ends.insert(std::get<0>(r));
      auto governing = [](const std::vector<Row>& v, uint64_t addr) -> const Row* {
        auto it = std::upper_bound(v.begin(), v.end(), addr,
                                   [](uint64_t a, const Row& r) { return a < std::get<0>(r); });
        return it == v.begin() ? nullptr : &*(it - 1);
      };
      auto at = [&](const std::vector<Row>& v, uint64_t addr) -> std::pair<uint32_t, std::string> {
        const Row* r = governing(v, addr);
        if (r == nullptr || std::get<1>(*r)) return {0, ""};
        return {std::get<2>(*r), std::get<3>(*r)};
      };
      for (const auto* v : {&mine, &theirs}) {
        for (const Row& r : *v) {
          for (uint64_t addr : {std::get<0>(r), std::get<0>(r) + 1}) {
            if (ends.count(addr)) continue;
            const Row* g1 = governing(mine, addr);
            const Row* g2 = governing(theirs, addr);
            if ((g1 && ends.count(std::get<0>(*g1))) || (g2 && ends.count(std::get<0>(*g2)))) continue;
            // Catch's macros only on a difference: per address they cost a minute under the sanitizers.
            if (at(mine, addr) != at(theirs, addr)) {
              INFO("unit " << units << " address 0x" << std::hex << addr);
              REQUIRE(at(mine, addr) == at(theirs, addr));
            }
            ++compared;
          }
        }
      }
      // And the same number of rows: nothing dropped or invented.
      REQUIRE(mine.size() == theirs.size());
      ++units;
      total += mine.size();
    }
    CHECK(units > 0);
    CHECK(total > 0);
    CHECK(compared > total / 2);
    dwarf_end(dw);
  }
}
