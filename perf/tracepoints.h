// fxprof perf layer: the scheduler's tracepoints in a sample's raw data (PERF_SAMPLE_RAW), as `perf record
// -e sched:sched_switch -e sched:sched_wakeup` and `perf sched record` write them: who left the CPU in
// which state and who ran next, and who was woken. Field offsets come from the file's format text
// (TRACING_DATA, "field:pid_t prev_pid;\toffset:24;\tsize:4;"), else are the ones every 64-bit kernel since
// 4.x writes. Bounds-checked: a field past the raw data is no field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace fxprof::perf {

struct SchedSwitch {
  uint32_t prev_tid = 0, next_tid = 0;
  bool preempted = false;  // prev_state says the task was still runnable (R, R+)
};

struct SchedWakeup {
  uint32_t tid = 0;        // the task woken
  bool interrupt = false;  // woken from an interrupt, softirq or NMI (common_flags): no task woke it
};

class SchedFields {
 public:
  // `tracing_data`: the file's TRACING_DATA feature ("" for none: the usual offsets).
  explicit SchedFields(std::string_view tracing_data);
  std::optional<SchedSwitch> sched_switch(std::span<const std::byte> raw) const;
  // sched_wakeup, sched_waking and sched_wakeup_new share their layout.
  std::optional<SchedWakeup> sched_wakeup(std::span<const std::byte> raw) const;

  struct Field {
    uint32_t offset = 0, size = 0;
  };

 private:
  Field prev_pid_{24, 4}, prev_state_{32, 8}, next_pid_{56, 4}, wake_pid_{24, 4};
};

}  // namespace fxprof::perf
