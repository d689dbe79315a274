// The eBPF waker tracer as a source (sources.h).
#include <algorithm>
#include <iterator>
#include <utility>

#include "recorder/sources.h"
#include "recorder/waker.h"

namespace fxprof::recorder {

namespace {

class WakerSource final : public Source {
 public:
  WakerSource(WakerTracer& tracer, std::function<std::vector<uint32_t>()> new_pids)
      : tracer_(tracer), new_pids_(std::move(new_pids)) {}
  bool next(Round& round, RecordSink&) override {
    for (uint32_t pid : new_pids_()) tracer_.trace(pid);
    // Wakes after the round's watermark (driver.h's Round::until) wait for the round of the records they
    // belong to: a wake is handled with the switches around it, not before the switch-out it follows.
    tracer_.drain(held_);
    const auto later = std::stable_partition(held_.begin(), held_.end(),
                                             [&](const Waking& w) { return w.time <= round.until; });
    std::move(held_.begin(), later, std::back_inserter(round.wakings));  // the builder takes their stacks
    held_.erase(held_.begin(), later);
    return true;
  }

 private:
  WakerTracer& tracer_;
  std::function<std::vector<uint32_t>()> new_pids_;
  std::vector<Waking> held_;
};

}  // namespace

std::unique_ptr<Source> waker_source(WakerTracer& tracer, std::function<std::vector<uint32_t>()> new_pids) {
  return std::make_unique<WakerSource>(tracer, std::move(new_pids));
}

}  // namespace fxprof::recorder
