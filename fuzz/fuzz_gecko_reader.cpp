// The Gecko reader on arbitrary bytes: `load`, `export`, `report` and `diff` read profiles users are sent.
#include <cstddef>
#include <cstdint>
#include <string>

#include "exporter/gecko_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string json(reinterpret_cast<const char*>(data), size);
  auto profile = fxprof::exporter::read_gecko(json, "fuzz");
  (void)profile;
  return 0;
}
