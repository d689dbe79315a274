// The perf buffers as a source (sources.h).
#include <algorithm>

#include "recorder/sources.h"

namespace fxprof::recorder {

namespace {

class BufferSource final : public Source {
 public:
  explicit BufferSource(RecordSource& buffers) : buffers_(buffers) {}
  bool next(Round& round, RecordSink&) override {
    const size_t from = round.records.size();
    buffers_.collect(round.records);
    // Each buffer is already nearly sorted; stable, so that records of one time keep their buffer's order.
    std::stable_sort(round.records.begin() + static_cast<std::ptrdiff_t>(from), round.records.end(),
                     [](const RecordRef& a, const RecordRef& b) {
                       return a.time != b.time ? a.time < b.time : a.switch_event > b.switch_event;
                     });
    round.fed = true;
    return true;
  }
  void release() override { buffers_.release(); }

 private:
  RecordSource& buffers_;
};

}  // namespace

std::unique_ptr<Source> buffer_source(RecordSource& buffers) {
  return std::make_unique<BufferSource>(buffers);
}

}  // namespace fxprof::recorder
