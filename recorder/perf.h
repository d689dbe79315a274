// fxprof recorder internals: the events a recording opens, the record layouts we ask for, and its ring
// buffers read in rounds (the driver's RingSet; one buffer: perf/ring.h).
// Only the recorder includes this header.
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "driver/sources.h"
#include "perf/records.h"
#include "perf/ring.h"
#include "recorder/host.h"

namespace fxprof::recorder {

// What every event of one recording samples; all events share it so records parse the same way.
struct EventConfig {
  bool hardware = false;        // PERF_COUNT_HW_CPU_CYCLES, else the cpu-clock software event
  bool exclude_kernel = false;  // user-space only (ordinary users with perf_event_paranoid=2)
  bool dwarf = false;           // REGS_USER + STACK_USER in addition to CALLCHAIN
  uint64_t frequency = 1000;
  uint32_t stack_size = 32768;  // DWARF: bytes of user stack copied per sample (multiple of 8, < 64 KiB)
  uint64_t regs_mask = 0;       // DWARF: PERF_SAMPLE_REGS_USER mask
  bool enable_on_exec = false;  // launch mode: start disabled, enabled by the kernel at execve
  bool cpu_wide = false;        // -a: events per CPU for every task (pid -1): nothing to inherit
  uint32_t wakeup_bytes = 0;    // wake poll() when this much data is waiting (0: kernel default, half)
  // Off-CPU: the context-switches event's registers (regs_mask plus RDI, the first system-call argument:
  // a futex wait's lock address; RDI alone in frame-pointer mode, where that event still samples
  // REGS_USER). Its samples go to their own ring buffers, so they parse with this mask.
  uint64_t switch_regs_mask = 0;
  uint32_t switch_wakeup_bytes = 0;  // the context-switches buffers' wake-up mark (0: kernel default)
  // DWARF: bytes of user stack copied per switch-out (multiple of 8, < 64 KiB). The copy is most of a
  // context-switch sample's cost (recorder.h), so it is smaller than CPU samples' by default.
  uint32_t switch_stack_size = 8192;
  // `record -e`: sample this event (counters/events.h: type and config) every `event_period` events instead
  // of the clock at `frequency`; 0: the clock.
  uint32_t event_type = 0;
  uint64_t event_config = 0;
  uint64_t event_period = 0;

  uint64_t sample_type() const;
  uint32_t regs_count() const { return static_cast<uint32_t>(__builtin_popcountll(regs_mask)); }
  uint32_t switch_regs_count() const { return static_cast<uint32_t>(__builtin_popcountll(switch_regs_mask)); }
};

perf_event_attr make_attr(const EventConfig& c);
// The off-CPU event: the context-switches software event with period 1, sampled in the outgoing thread at
// every switch-out with the same sample layout as make_attr's (user registers, a user stack copy of
// switch_stack_size bytes, kernel callchain), and nothing else: no side-band records (the CPU event carries
// those and the switch records).
perf_event_attr make_switch_attr(const EventConfig& c);
// perf_regs.h (x86-64) bit of RDI, the first system-call argument.
using perf::kPerfRegDiBit;

using perf::perf_event_open;
using perf::RingBuffer;

// The ring buffers of one recording, read in rounds: the driver's (driver/sources.h), with record_time
// (recorder/records.h) for their records' times.
using driver::RingSet;

// Constants of the records we parse.
inline constexpr uint64_t kContextMax = static_cast<uint64_t>(-4095);  // PERF_CONTEXT_MAX

}  // namespace fxprof::recorder
