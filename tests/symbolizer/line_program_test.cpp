// Tests of symbolizer/line_program.cpp beyond its row-by-row agreement with libdw (symbolizer_test.cpp):
// relative include directories joined with the compilation directory, and malformed operands rejected.
#include "symbolizer/line_program.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

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
