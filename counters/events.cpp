#include "counters/events.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "base/fd.h"

namespace fxprof::counters {

namespace {

EventSpec sw(const char* name, uint64_t config, uint64_t period, const char* unit, const char* what) {
  return {name, PERF_TYPE_SOFTWARE, config, Source::Software, period, unit, what};
}
EventSpec hw(const char* name, uint64_t config, uint64_t period, const char* what) {
  return {name, PERF_TYPE_HARDWARE, config, Source::Hardware, period, "", what};
}

// Hardware periods are primes (a period in step with a loop would sample one instruction of it).
const std::array<EventSpec, 14> kEvents = {
    sw("task-clock", PERF_COUNT_SW_TASK_CLOCK, 1000000, "msec", "CPU time of the program's threads"),
    sw("cpu-clock", PERF_COUNT_SW_CPU_CLOCK, 1000000, "msec", "the CPU clock while the threads run"),
    sw("context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES, 1, "", "times a thread left the CPU"),
    sw("cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS, 1, "", "times a thread moved to another CPU"),
    sw("page-faults", PERF_COUNT_SW_PAGE_FAULTS, 1, "", "page faults, minor and major"),
    sw("minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN, 1, "",
       "faults served from RAM (first touch, copy-on-write)"),
    sw("major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ, 1, "", "faults that waited for the disk"),
    hw("cycles", PERF_COUNT_HW_CPU_CYCLES, 1000003, "CPU cycles"),
    hw("instructions", PERF_COUNT_HW_INSTRUCTIONS, 1000003, "instructions retired"),
    hw("cache-references", PERF_COUNT_HW_CACHE_REFERENCES, 10007, "last-level cache accesses"),
    hw("cache-misses", PERF_COUNT_HW_CACHE_MISSES, 1009, "last-level cache misses"),
    hw("branches", PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 100003, "branch instructions"),
    hw("branch-misses", PERF_COUNT_HW_BRANCH_MISSES, 1009, "mispredicted branches"),
    hw("bus-cycles", PERF_COUNT_HW_BUS_CYCLES, 100003, "bus cycles"),
};

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<EventSpec> find_tracepoint(std::string_view name, const std::string& tracefs) {
  const size_t colon = name.find(':');
  const std::string cat(name.substr(0, colon)), ev(name.substr(colon + 1));
  if (cat.empty() || ev.empty() || ev.find(':') != std::string::npos || cat.find('/') != std::string::npos ||
      ev.find('/') != std::string::npos || cat[0] == '.' || ev[0] == '.')
    return Err("'" + std::string(name) +
               "' is not a tracepoint name (CATEGORY:NAME, e.g. syscalls:sys_enter_write)");
  std::vector<std::string> roots;
  if (!tracefs.empty()) {
    roots.push_back(tracefs);
  } else {
    roots = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
    // An unmounted tracefs (an empty /sys/kernel/tracing): mount it as perf does, when we may.
    if (!is_dir("/sys/kernel/tracing/events") && !is_dir("/sys/kernel/debug/tracing/events") &&
        geteuid() == 0)
      mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr);
  }
  bool any_root = false;
  for (const std::string& root : roots) {
    if (!is_dir(root + "/events")) continue;
    any_root = true;
    auto id = read_file(root + "/events/" + cat + "/" + ev + "/id");
    if (!id) continue;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(id->c_str(), &end, 10);
    if (end == id->c_str()) continue;
    return EventSpec{std::string(name), PERF_TYPE_TRACEPOINT, v, Source::Tracepoint, 1, "", "tracepoint"};
  }
  if (!any_root)
    return Err("cannot use tracepoint '" + std::string(name) +
               "': tracefs is not mounted (as root: mount -t tracefs nodev /sys/kernel/tracing)");
  return Err("no tracepoint '" + std::string(name) + "' in this kernel (see " + roots[0] + "/events/" + cat +
             "/ for the names; reading it needs root)");
}

}  // namespace

std::span<const EventSpec> known_events() { return kEvents; }

std::vector<EventSpec> default_stat_events(bool pmu) {
  std::vector<EventSpec> out;
  for (const EventSpec& e : kEvents) {
    if (e.name == "cpu-clock" || e.name == "bus-cycles") continue;
    if (e.source == Source::Hardware && !pmu) continue;
    out.push_back(e);
  }
  return out;
}

Result<EventSpec> find_event(std::string_view name, const std::string& tracefs) {
  for (const EventSpec& e : kEvents)
    if (e.name == name) return e;
  // perf's aliases.
  if (name == "faults") return find_event("page-faults");
  if (name == "cs") return find_event("context-switches");
  if (name == "migrations") return find_event("cpu-migrations");
  if (name == "cpu-cycles") return find_event("cycles");
  if (name == "branch-instructions") return find_event("branches");
  if (name.find(':') != std::string_view::npos) return find_tracepoint(name, tracefs);
  std::string known;
  for (const EventSpec& e : kEvents) known += (known.empty() ? "" : ", ") + e.name;
  return Err("unknown event '" + std::string(name) + "' (known: " + known +
             ", or a tracepoint CATEGORY:NAME such as syscalls:sys_enter_write)");
}

Result<std::vector<EventSpec>> find_events(std::string_view list, const std::string& tracefs) {
  std::vector<EventSpec> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string_view one =
        list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (one.empty()) return Err("empty event name in '" + std::string(list) + "'");
    auto e = find_event(one, tracefs);
    if (!e) return std::move(e).take_error();
    bool dup = false;
    for (const EventSpec& o : out) dup |= o.type == e->type && o.config == e->config;
    if (!dup) out.push_back(std::move(*e));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

perf_event_attr counting_attr(const EventSpec& e, bool exclude_kernel, bool enable_on_exec) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = e.type;
  a.config = e.config;
  a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID;
  a.inherit = 1;
  a.disabled = enable_on_exec ? 1 : 0;
  a.enable_on_exec = enable_on_exec ? 1 : 0;
  a.exclude_kernel = exclude_kernel ? 1 : 0;
  a.exclude_hv = 1;
  return a;
}

bool have_pmu(const std::string& sysfs_devices) {
  for (const char* name : {"cpu", "cpu_core", "cpu_atom", "armv8_pmuv3", "armv8_pmuv3_0"})
    if (is_dir(sysfs_devices + "/" + name) || access((sysfs_devices + "/" + name).c_str(), F_OK) == 0)
      return true;
  return false;
}

bool unsupported_errno(int err) {
  return err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == EINVAL;
}

std::string no_pmu_message(std::string_view command) {
  std::string m =
      "no hardware counters on this machine (no PMU: a virtual machine, container or CI runner): cycles, "
      "instructions, cache and branch events are unavailable, not zero. ";
  if (command == "stat")
    m += "The software counts (task-clock, context switches, migrations, page faults) are exact; "
         "--cache-sim simulates the caches under Cachegrind instead.";
  else
    m +=
        "Sampling works on the software events (page-faults, major-faults, context-switches, cpu-migrations, "
        "task-clock) and tracepoints.";
  return m;
}

}  // namespace fxprof::counters
