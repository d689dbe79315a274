#include "recorder/perf.h"

#include <cstring>
#include <ctime>

#include "recorder/builder.h"

namespace fxprof::recorder {

uint64_t EventConfig::sample_type() const {
  uint64_t t = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN;
  // With a fixed period (-e) the period is known, and asking for it makes the kernel sample a software
  // event (faults, switches, tracepoints) at every occurrence whatever the period (perf_swevent_event).
  if (!event_period) t |= PERF_SAMPLE_PERIOD;
  if (dwarf) t |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  return t;
}

perf_event_attr make_attr(const EventConfig& c) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  if (c.event_period) {
    a.type = c.event_type;
    a.config = c.event_config;
  } else if (c.hardware) {
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_CPU_CYCLES;
  } else {
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
  }
  if (c.event_period) {
    a.sample_period = c.event_period;  // one sample per period events: each sample weighs the same
  } else {
    a.sample_freq = c.frequency;
    a.freq = 1;
  }
  a.sample_type = c.sample_type();
  if (c.dwarf) {
    a.sample_regs_user = c.regs_mask;
    a.sample_stack_user = c.stack_size;
  }
  a.disabled = c.enable_on_exec ? 1 : 0;
  a.enable_on_exec = c.enable_on_exec ? 1 : 0;
  a.inherit = c.cpu_wide ? 0 : 1;
  a.mmap = 1;
  a.mmap2 = 1;
  a.mmap_data = 1;  // data mappings too: a program announces its marker files by mapping them (markers.h)
  a.comm = 1;
  a.comm_exec = 1;
  a.task = 1;
  a.context_switch = 1;
  a.sample_id_all = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.exclude_kernel = c.exclude_kernel ? 1 : 0;
  a.exclude_hv = c.exclude_kernel ? 1 : 0;
  if (c.wakeup_bytes) {
    a.watermark = 1;
    a.wakeup_watermark = c.wakeup_bytes;
  }
  return a;
}

perf_event_attr make_switch_attr(const EventConfig& c) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
  a.sample_period = 1;
  // Registers in frame-pointer mode too (RDI alone there): the lock address of a futex wait.
  a.sample_type = c.sample_type() | PERF_SAMPLE_REGS_USER;
  a.sample_regs_user = c.switch_regs_mask;
  if (c.dwarf) a.sample_stack_user = c.switch_stack_size;
  if (c.switch_wakeup_bytes) {
    a.watermark = 1;
    a.wakeup_watermark = c.switch_wakeup_bytes;
  }
  a.disabled = c.enable_on_exec ? 1 : 0;
  a.enable_on_exec = c.enable_on_exec ? 1 : 0;
  a.inherit = c.cpu_wide ? 0 : 1;
  a.sample_id_all = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  return a;
}

}  // namespace fxprof::recorder
