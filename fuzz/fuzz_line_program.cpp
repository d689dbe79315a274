// The hand-written DWARF line-program decoder (symbolizer/line_program.h) on a mutated .debug_line, with the
// same bytes standing in for .debug_str and .debug_line_str so string forms point somewhere.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "symbolizer/line_program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  fxprof::symbolizer::LineSections sec{bytes, bytes, bytes};
  std::deque<std::string> store;
  std::vector<const char*> files;
  std::vector<fxprof::symbolizer::DecodedRow> rows;
  (void)fxprof::symbolizer::decode_line_program(sec, 0, "/comp/dir", store, files, rows);
  return 0;
}
