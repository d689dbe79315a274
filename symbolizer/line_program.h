// Internal to symbolizer/: a direct decoder of DWARF 2-5 line programs (.debug_line).
//
// Why not libdw's dwarf_getsrclines: it allocates per row and sorts, ~300 ns a row here (77 ms for the 260k
// rows of an 18 MB C++ test binary, most of a cold request). This decoder writes flat rows straight from the
// section bytes (~10x faster). It reports failure on anything it does not know (a form, a version) and the
// caller then falls back to libdw, so an exotic producer costs speed, never correctness.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fxprof::symbolizer {

struct LineSections {
  std::span<const uint8_t> line;      // .debug_line
  std::span<const uint8_t> str;       // .debug_str (DW_FORM_strp)
  std::span<const uint8_t> line_str;  // .debug_line_str (DW_FORM_line_strp)
};

struct DecodedRow {
  uint64_t addr;
  uint32_t file;  // index into the decoded file table
  uint32_t line;
  bool end;  // end of sequence
};

// The path a line table names, as a normalized absolute path when it can be made one: a relative path is
// joined with DW_AT_comp_dir (DWARF 4 include directories relative to it, as in every cargo project's
// src/main.rs, and compilers run with relative paths, as under ccache's base_dir), then "." and ".." are
// removed lexically, so that the file we return is one /source/v1 can serve. Paths that stay relative are
// returned as they are. Every file name the symbolizer hands out goes through here.
std::string absolute_source_path(std::string_view path, const char* comp_dir);

// Decodes the line program at `offset`. File names go through absolute_source_path() and
// stored in `store`; files[i] is the path of file index i (DWARF 5: 0-based; earlier: 1-based, files[0]
// null). Returns false on malformed or unsupported input (rows/files are then unspecified).
bool decode_line_program(const LineSections& sec, uint64_t offset, const char* comp_dir,
                         std::deque<std::string>& store, std::vector<const char*>& files,
                         std::vector<DecodedRow>& rows);

}  // namespace fxprof::symbolizer
