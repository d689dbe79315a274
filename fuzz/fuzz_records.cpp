// Perf record decoding alone (recorder/records.h): a mutated stream of records of every type, decoded under
// each layout (with or without PERIOD, DWARF registers and stacks, from the CPU or the context-switches
// buffer), every field of the result read. A size the kernel never writes must not make decode() read past
// the record, nor give spans outside it.
#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <variant>
#include <vector>

#include "fuzz/record_stream.h"
#include "recorder/records.h"
#include "recorder/unwind/unwinder.h"

using namespace fxprof::recorder;
namespace fuzz = fxprof::fuzz;

namespace {

template <class... F>
struct Visit : F... {
  using F::operator()...;
};
template <class... F>
Visit(F...) -> Visit<F...>;

void inside(std::span<const std::byte> s, const std::vector<uint64_t>& rec, size_t size) {
  auto* begin = reinterpret_cast<const std::byte*>(rec.data());
  if (!s.empty() && (s.data() < begin || s.data() + s.size() > begin + size)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  RecordLayout layout;
  layout.period = (data[0] & 1) != 0;
  layout.dwarf = (data[0] & 2) != 0;
  layout.regs_mask = layout.dwarf ? user_regs_mask() : 0;
  layout.switch_regs_mask = layout.regs_mask | kPerfRegDiBit;
  const bool switch_event = (data[0] & 4) != 0;
  uint64_t sum = 0;
  fuzz::for_each_record(data, size, [&](const perf_event_header* hp, const std::vector<uint64_t>& record) {
    const size_t rsize = hp->size;
    sum += record_time(hp);
    std::visit(Visit{[&](const SampleRecord& s) {
                       inside(s.chain, record, rsize);
                       inside(s.stack, record, rsize);
                       for (size_t i = 0; i < s.chain_size(); ++i) sum += s.chain_at(i);
                       for (size_t i = 0; i < s.n_regs; ++i) sum += s.regs[i];
                       for (std::byte b : s.stack) sum += static_cast<uint8_t>(b);
                     },
                     [&](const Mmap2Record& m) {
                       inside(std::as_bytes(std::span(m.path.data(), m.path.size())), record, rsize);
                       sum += m.addr + m.len + m.path.size();
                     },
                     [&](const CommRecord& c) {
                       inside(std::as_bytes(std::span(c.comm.data(), c.comm.size())), record, rsize);
                       sum += c.comm.size();
                     },
                     [&](const auto& other) { sum += sizeof other; }},
               decode(hp, layout, switch_event));
  });
  volatile uint64_t keep = sum;
  (void)keep;
  return 0;
}
