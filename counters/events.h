// fxprof counters: the perf events a user can name (`fxprof stat -e`, `fxprof record -e`), as one table from
// perf's names to perf_event_attr, and whether this machine has hardware counters at all.
//
// Names are perf's (`perf list`): the software events every kernel has (task-clock, page-faults, ...), the
// generic hardware events (cycles, cache-misses, ...: they need a PMU, which cloud VMs, CI runners and many
// containers lack), and tracepoints as CATEGORY:NAME (syscalls:sys_enter_write), whose id is read from
// tracefs. The table is the one place that knows how a name becomes an attr: `stat` counts with it and
// `record -e` samples with it.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace fxprof::counters {

enum class Source { Software, Hardware, Tracepoint };

struct EventSpec {
  std::string name;  // perf's name, e.g. "page-faults", "syscalls:sys_enter_write"
  uint32_t type = PERF_TYPE_SOFTWARE;
  uint64_t config = 0;
  Source source = Source::Software;
  // `record -e`: one sample every `period` events (software faults and switches, tracepoints: every one;
  // hardware: a period that gives ~1k samples/s on a busy core at a few GHz).
  uint64_t period = 1;
  std::string unit;         // "msec" for task-clock (counted in ns), else ""
  std::string description;  // one line for --help and the README
};

// Every event with a fixed name, in the order `stat` prints them: software first, then hardware.
std::span<const EventSpec> known_events();

// The events `fxprof stat` counts without -e: the software ones, and the hardware ones when `pmu`.
std::vector<EventSpec> default_stat_events(bool pmu);

// A name from the table or a tracepoint CATEGORY:NAME (its id from `tracefs`, default: /sys/kernel/tracing,
// then /sys/kernel/debug/tracing; as root an unmounted tracefs is mounted at the first, as perf does).
// Errors name the event and what exists instead.
Result<EventSpec> find_event(std::string_view name, const std::string& tracefs = "");
// A comma-separated list (stat -e a,b,c); duplicates are kept once.
Result<std::vector<EventSpec>> find_events(std::string_view list, const std::string& tracefs = "");

// The attr that counts `e` in the calling process's children (inherit), starting at exec when
// `enable_on_exec`; read_format has the enabled/running times (hardware counters multiplex).
perf_event_attr counting_attr(const EventSpec& e, bool exclude_kernel, bool enable_on_exec);

// Hardware counters: a `cpu` (or `cpu_core`/`cpu_atom` on hybrid parts) PMU under `sysfs_devices`
// (/sys/bus/event_source/devices).
bool have_pmu(const std::string& sysfs_devices = "/sys/bus/event_source/devices");
// Whether an errno from perf_event_open means "no such counter here" rather than a permission problem.
bool unsupported_errno(int err);

// The one notice for a machine without a PMU: what is missing and what still works (without "fxprof: ").
std::string no_pmu_message(std::string_view command);

}  // namespace fxprof::counters
