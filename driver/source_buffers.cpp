// The perf buffers as a source (sources.h): the ring buffers read in rounds, and the source over them.
#include <algorithm>

#include "driver/sources.h"

namespace fxprof::driver {

void RingSet::add(perf::RingBuffer rb, bool switch_event) {
  bufs_.push_back(std::move(rb));
  switch_.push_back(switch_event);
  scratch_.emplace_back().reserve(1 << 16);
  heads_.push_back(bufs_.back().tail());
}

void RingSet::collect(std::vector<RecordRef>& out, uint64_t until) {
  for (size_t b = 0; b < bufs_.size(); ++b) {
    perf::RingBuffer& rb = bufs_[b];
    const uint64_t head = rb.load_head();
    uint64_t pos = rb.tail();
    while (pos < head) {
      const perf_event_header* h = rb.record_at(pos, scratch_[b]);
      if (h->size < sizeof(perf_event_header)) {  // cannot happen; do not spin on it
        pos = head;
        break;
      }
      const uint64_t t = time_of_(h);
      // Newer than the watermark: this buffer stops here for this round (its records are in time order).
      if (t != 0 && t > until) break;
      out.push_back({t, h, switch_[b]});
      pos += h->size;
    }
    heads_[b] = pos;
  }
}

void RingSet::release() {
  for (size_t b = 0; b < bufs_.size(); ++b) bufs_[b].release(heads_[b]);
}

namespace {

class BufferSource final : public Source {
 public:
  explicit BufferSource(RecordSource& buffers) : buffers_(buffers) {}
  bool next(Round& round, RecordSink&) override {
    const size_t from = round.records.size();
    buffers_.collect(round.records, round.until);
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

size_t feed_round(RecordSource& source, RecordSink& sink, uint64_t until) {
  Driver driver(sink);
  const std::unique_ptr<Source> buffers = buffer_source(source);
  driver.add(*buffers);
  return driver.round(until);
}

}  // namespace fxprof::driver
