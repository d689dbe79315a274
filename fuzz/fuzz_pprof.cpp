// The pprof importer (recorder/pprof_import.h): mutated profile.proto bytes (gzipped or not) decoded and
// built into the model. Truncations, varints and lengths that lie, ids and string indices that point nowhere,
// counts too large: an error, never a read past the bytes, a crash or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "recorder/pprof_import.h"

using namespace fxprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = recorder::import_pprof(std::string(reinterpret_cast<const char*>(data), size), {});
  if (!r) return 0;
  uint64_t sum = r->profile.frames.size() + r->profile.stacks.size();
  for (const model::Process& p : r->profile.processes)
    for (const model::Thread& t : p.threads) sum += t.samples.size() + t.allocations.size();
  volatile uint64_t keep = sum;
  (void)keep;
  return 0;
}
