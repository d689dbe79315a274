// The Gecko reader on arbitrary bytes: `load`, `export`, `report` and `diff` read profiles users are sent.
// The reader streams its text in chunks: each input is read whole and again in small chunks (a border every
// few bytes), and both readings must agree, error message included.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "exporter/gecko_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto whole = fxprof::exporter::read_gecko(json, "fuzz");
  auto chunked = fxprof::exporter::read_gecko(json, "fuzz", nullptr, 1 + size % 61);
  if (whole.ok() != chunked.ok()) std::abort();
  if (!whole.ok() && whole.error() != chunked.error()) std::abort();
  if (whole.ok() && whole->processes.size() != chunked->processes.size()) std::abort();
  return 0;
}
