// ELF identity (build ID, segments, debuglink, the address mapping) parsed from a mutated image: the recorder
// and the symbolizer read every binary a profiled program maps; and its USDT probe notes (`fxprof probes`).
#include <cstddef>
#include <cstdint>
#include <span>

#include "elf/elf.h"
#include "elf/usdt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data), size);
  (void)fxprof::elf::parse_usdt_probes(image);
  auto id = fxprof::elf::parse(image);
  if (!id) return 0;
  for (uint64_t pgoff : {uint64_t{0}, uint64_t{0x1000}, uint64_t{0x2000}})
    for (uint32_t prot : {1u, 5u, 3u}) {
      (void)id->mapping_svma(pgoff, prot);
      (void)id->lib_offset(pgoff, prot);
    }
  return 0;
}
