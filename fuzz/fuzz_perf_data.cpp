// The perf.data reader (perf/data_file.h): a mutated file in file or pipe mode, read whole (attributes, ids,
// feature sections, records put in time order), then every record decoded by the file's own attributes.
// A length, count or offset that lies must be an error or be skipped, never a read past the bytes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "perf/data_file.h"

using namespace fxprof::perf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = DataFile::parse(std::as_bytes(std::span(data, size)), "fuzz.data");
  if (!f) return 0;
  uint64_t sum = f->features.hostname.size() + f->features.build_ids.size();
  for (const Event& e : f->events) sum += e.name.size() + e.ids.size();
  for (const RecordAt& r : f->records) {
    sum += r.time;
    const Record d = decode(r.h, f->layout);
    if (const auto* s = std::get_if<SampleRecord>(&d)) {
      for (size_t i = 0; i < s->chain_size(); ++i) sum += s->chain_at(i);
      for (std::byte b : s->stack) sum += static_cast<uint8_t>(b);
    } else if (const auto* m = std::get_if<Mmap2Record>(&d)) {
      sum += m->path.size() + m->build_id.size();
    } else if (const auto* c = std::get_if<CommRecord>(&d)) {
      sum += c->comm.size();
    }
  }
  volatile uint64_t keep = sum;
  (void)keep;
  return 0;
}
