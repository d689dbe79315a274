// The server's request parsers for /symbolicate/v5, /source/v1 and /asm/v1: whatever a page that knows the
// token sends. The first byte picks the endpoint; the symbolizer knows no library, so every lookup is refused
// after parsing (the parsers and the error answers are what is fuzzed here).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static fxprof::symbolizer::Symbolizer symbols;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      (void)fxprof::server::symbolicate_v5(symbols, body);
      break;
    case 1:
      (void)fxprof::server::source_v1(symbols, body);
      break;
    default:
      (void)fxprof::server::asm_v1(symbols, body);
      break;
  }
  return 0;
}
