#include "counters/events.h"

#include <linux/perf_event.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "recorder/perf.h"
#include "tests/support/support.h"

using namespace fxprof;
using namespace fxprof::counters;

TEST_CASE("the event table maps perf's names to perf_event_attr types and configs") {
  struct Want {
    const char* name;
    uint32_t type;
    uint64_t config;
    Source source;
  };
  for (const Want& w : std::initializer_list<Want>{
           {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, Source::Software},
           {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, Source::Software},
           {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, Source::Software},
           {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, Source::Software},
           {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, Source::Software},
           {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, Source::Software},
           {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, Source::Software},
           {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, Source::Hardware},
           {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, Source::Hardware},
           {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, Source::Hardware},
           {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, Source::Hardware},
           {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, Source::Hardware},
           {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, Source::Hardware},
       }) {
    INFO(w.name);
    auto e = find_event(w.name);
    REQUIRE(e);
    CHECK(e->type == w.type);
    CHECK(e->config == w.config);
    CHECK(e->source == w.source);
  }
  auto bad = find_event("cache-missez");
  REQUIRE(!bad);
  CHECK(bad.error().rfind("unknown event 'cache-missez' (known: task-clock, cpu-clock, context-switches",
                          0) == 0);
  auto list = find_events("page-faults,faults,cs");
  REQUIRE(list);
  CHECK(list->size() == 2);  // faults is page-faults again
  CHECK(!find_events("page-faults,,cs"));
}

TEST_CASE("counting attrs: inherited, started at exec, with the times that scale multiplexed counters") {
  auto e = find_event("cache-misses");
  REQUIRE(e);
  const perf_event_attr a = counting_attr(*e, false, true);
  CHECK(a.type == PERF_TYPE_HARDWARE);
  CHECK(a.config == PERF_COUNT_HW_CACHE_MISSES);
  CHECK(a.size == sizeof a);
  CHECK(a.inherit == 1);
  CHECK(a.disabled == 1);
  CHECK(a.enable_on_exec == 1);
  CHECK(a.exclude_kernel == 0);
  CHECK(a.sample_period == 0);  // counting, not sampling
  CHECK(a.read_format == (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID));
  const perf_event_attr u = counting_attr(*e, true, false);
  CHECK(u.exclude_kernel == 1);
  CHECK(u.disabled == 0);
  CHECK(u.enable_on_exec == 0);
}

TEST_CASE("record -e: the sampling attr takes the event's type, config and period instead of the clock") {
  auto e = find_event("branch-misses");
  REQUIRE(e);
  recorder::EventConfig c;
  c.frequency = 1000;
  c.event_type = e->type;
  c.event_config = e->config;
  c.event_period = e->period;
  const perf_event_attr a = recorder::make_attr(c);
  CHECK(a.type == PERF_TYPE_HARDWARE);
  CHECK(a.config == PERF_COUNT_HW_BRANCH_MISSES);
  CHECK(a.freq == 0);
  CHECK(a.sample_period == 1009);
  CHECK((a.sample_type & PERF_SAMPLE_CALLCHAIN) != 0);  // the same stacks as clock samples
  // Asked for, the period would make the kernel sample software events at every occurrence.
  CHECK((a.sample_type & PERF_SAMPLE_PERIOD) == 0);
  CHECK(a.inherit == 1);
  // Without an event: the clock at the frequency, as before.
  recorder::EventConfig clock;
  clock.frequency = 997;
  const perf_event_attr b = recorder::make_attr(clock);
  CHECK(b.type == PERF_TYPE_SOFTWARE);
  CHECK(b.config == PERF_COUNT_SW_CPU_CLOCK);
  CHECK(b.freq == 1);
  CHECK(b.sample_freq == 997);
  CHECK((b.sample_type & PERF_SAMPLE_PERIOD) != 0);
}

TEST_CASE("tracepoints are CATEGORY:NAME with the id tracefs gives") {
  test::TempDir dir;
  mkdir(dir.file("events").c_str(), 0755);
  mkdir(dir.file("events/syscalls").c_str(), 0755);
  mkdir(dir.file("events/syscalls/sys_enter_write").c_str(), 0755);
  std::ofstream(dir.file("events/syscalls/sys_enter_write/id")) << "642\n";
  auto e = find_event("syscalls:sys_enter_write", dir.path());
  REQUIRE(e);
  CHECK(e->type == PERF_TYPE_TRACEPOINT);
  CHECK(e->config == 642);
  CHECK(e->source == Source::Tracepoint);
  CHECK(e->period == 1);
  auto missing = find_event("syscalls:sys_enter_nope", dir.path());
  REQUIRE(!missing);
  CHECK(missing.error() == "no tracepoint 'syscalls:sys_enter_nope' in this kernel (see " + dir.path() +
                               "/events/syscalls/ for the names; reading it needs root)");
  auto bad = find_event("syscalls:../x", dir.path());
  REQUIRE(!bad);
  CHECK(bad.error().find("is not a tracepoint name") != std::string::npos);
  auto unmounted = find_event("sched:sched_switch", dir.file("nothing"));
  REQUIRE(!unmounted);
  CHECK(unmounted.error().find("tracefs is not mounted") != std::string::npos);
}

TEST_CASE("the PMU is found by its event source; without one stat counts the software events only") {
  test::TempDir dir;
  CHECK(!have_pmu(dir.path()));
  for (const char* s : {"software", "tracepoint", "breakpoint", "msr", "uprobe"})  // this VM's sources
    mkdir(dir.file(s).c_str(), 0755);
  CHECK(!have_pmu(dir.path()));
  mkdir(dir.file("cpu").c_str(), 0755);
  CHECK(have_pmu(dir.path()));
  std::vector<std::string> sw, hw;
  for (const auto& e : default_stat_events(false)) sw.push_back(e.name);
  for (const auto& e : default_stat_events(true)) hw.push_back(e.name);
  CHECK(sw == std::vector<std::string>{"task-clock", "context-switches", "cpu-migrations", "page-faults",
                                       "minor-faults", "major-faults"});
  CHECK(hw.size() == sw.size() + 6);
  CHECK(hw.back() == "branch-misses");
  CHECK(no_pmu_message("stat").find("unavailable, not zero") != std::string::npos);
}
