// Tests of perf/tracepoints.h: the scheduler's tracepoint fields at the offsets of the file's format text,
// else the usual ones; raw data too short for a field is no record.
#include "perf/tracepoints.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

namespace p = fxprof::perf;

namespace {

template <class T>
void put(std::vector<std::byte>& raw, size_t at, T v) {
  if (raw.size() < at + sizeof v) raw.resize(at + sizeof v);
  std::memcpy(raw.data() + at, &v, sizeof v);
}

// The format text perf copies into TRACING_DATA, with sched_switch's fields moved (as another kernel may).
constexpr const char* kFormats =
    "name: sched_wakeup\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\n\tfield:pid_t pid;\toffset:28;\tsize:4;\n"
    "\nprint fmt: \"comm=%s pid=%d\"\n"
    "name: sched_switch\nID: 2\nformat:\n\tfield:int common_pid;\toffset:4;\tsize:4;\n"
    "\tfield:pid_t prev_pid;\toffset:40;\tsize:4;\n\tfield:long prev_state;\toffset:48;\tsize:8;\n"
    "\tfield:pid_t next_pid;\toffset:72;\tsize:4;\n\nprint fmt: \"prev_pid=%d\"\n";

}  // namespace

TEST_CASE("sched tracepoints: the usual offsets without format text", "[perf]") {
  const p::SchedFields f("");
  std::vector<std::byte> sw;
  put<uint32_t>(sw, 24, 100);  // prev_pid
  put<uint64_t>(sw, 32, 0x1);  // prev_state S: blocked
  put<uint32_t>(sw, 56, 200);  // next_pid
  put<uint32_t>(sw, 60, 120);  // next_prio
  auto s = f.sched_switch(sw);
  REQUIRE(s);
  CHECK((s->prev_tid == 100 && s->next_tid == 200 && !s->preempted));
  put<uint64_t>(sw, 32, 0x100);  // "R+": TASK_REPORT_MAX, still runnable
  CHECK(f.sched_switch(sw)->preempted);
  CHECK(!f.sched_switch(std::span(sw).first(57)));  // next_pid cut short

  std::vector<std::byte> wk;
  put<uint8_t>(wk, 2, 0x08);  // common_flags: a hard interrupt
  put<uint32_t>(wk, 24, 300);
  put<uint32_t>(wk, 32, 1);  // target_cpu
  auto w = f.sched_wakeup(wk);
  REQUIRE(w);
  CHECK((w->tid == 300 && w->interrupt));
  CHECK(!f.sched_wakeup(std::span(wk).first(20)));
}

TEST_CASE("sched tracepoints: offsets from the file's format text", "[perf]") {
  const p::SchedFields f(kFormats);
  std::vector<std::byte> sw;
  put<uint32_t>(sw, 40, 7);
  put<uint64_t>(sw, 48, 0x2);  // D
  put<uint32_t>(sw, 72, 8);
  auto s = f.sched_switch(sw);
  REQUIRE(s);
  CHECK((s->prev_tid == 7 && s->next_tid == 8 && !s->preempted));
  std::vector<std::byte> wk;
  put<uint32_t>(wk, 28, 9);
  REQUIRE(f.sched_wakeup(wk));
  CHECK(f.sched_wakeup(wk)->tid == 9);
  CHECK(!f.sched_wakeup(wk)->interrupt);
}
