// ELF identity (build ID, segments, debuglink, the address mapping) parsed from a mutated image: the recorder
// and the symbolizer read every binary a profiled program maps.
#include <cstddef>
#include <cstdint>
#include <span>

#include "elf/elf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto id = fxprof::elf::parse(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
  if (!id) return 0;
  for (uint64_t pgoff : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0x2000}})
    for (uint32_t prot : {1u, 5u, 3u}) {
      (void)id->mapping_svma(pgoff, prot);
      (void)id->lib_offset(pgoff, prot);
    }
  return 0;
}
