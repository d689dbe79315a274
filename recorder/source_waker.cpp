// The eBPF waker tracer as a source (sources.h).
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
    tracer_.drain(round.wakings);  // the builder takes their stacks
    return true;
  }

 private:
  WakerTracer& tracer_;
  std::function<std::vector<uint32_t>()> new_pids_;
};

}  // namespace

std::unique_ptr<Source> waker_source(WakerTracer& tracer, std::function<std::vector<uint32_t>()> new_pids) {
  return std::make_unique<WakerSource>(tracer, std::move(new_pids));
}

}  // namespace fxprof::recorder
