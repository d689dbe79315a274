// recorder/window.h, the continuous mode's cut (`fxprof agent`): synthetic records through the RecordSource
// boundary (tests/recorder/synthetic.h) into a ProfileBuilder, cut into windows; no perf, no root. What the
// live recording holds must not grow with the programs that came and went: the agent's hour beside a test
// suite grew to 240 MB, most of it the frames and stacks of every short-lived program (each at addresses of
// its own), interned once and kept; nor the binaries they mapped (every program a test suite built stayed
// mapped, with its descriptor, for the recording's hour).
#include "recorder/window.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/builder.h"
#include "recorder/unwind/unwinder.h"
#include "tests/recorder/synthetic.h"
#include "tests/support/support.h"

using namespace fxprof;
using test::Rec;
using test::sample_start;

namespace {

const uint64_t kUser = static_cast<uint64_t>(PERF_CONTEXT_USER);

Rec task(uint32_t type, uint32_t pid, uint32_t ppid, uint64_t time) {
  Rec r(type);
  r.u32x2(pid, ppid).u32x2(pid, ppid).u64(time).trailer(pid, pid, time);
  return r;
}

Rec exec_comm(uint32_t pid, const std::string& name, uint64_t time) {
  Rec r(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
  r.u32x2(pid, pid).str(name).trailer(pid, pid, time);
  return r;
}

Rec lost(uint32_t pid, uint64_t time, uint64_t n) {
  Rec r(PERF_RECORD_LOST);
  r.u64(1).u64(n).trailer(pid, pid, time);
  return r;
}

Rec mmap2(uint32_t pid, uint64_t addr, const std::string& path, uint64_t time) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  Rec r(PERF_RECORD_MMAP2);
  r.u32x2(pid, pid)
      .u64(addr)
      .u64(0x1000)
      .u64(0)
      .u32x2(major(st.st_dev), minor(st.st_dev))
      .u64(st.st_ino)
      .u64(0);
  r.u32x2(PROT_READ | PROT_EXEC, MAP_PRIVATE).str(path).trailer(pid, pid, time);
  return r;
}

uint64_t leaf_address(const model::Profile& p, model::StackId s) {
  return p.frames.get(p.stacks.frame(s)).address;
}

}  // namespace

TEST_CASE("window: the live recording forgets the programs that came and went", "[recorder]") {
  model::Profile live;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(live, nullptr, events, procfs);
  builder.on_launched(100, "sh", 0);
  const int kWindows = 200;
  for (int i = 0; i < kWindows; ++i) {
    const uint64_t t = 1000 * static_cast<uint64_t>(i + 1);
    const uint32_t pid = 1000 + static_cast<uint32_t>(i);
    // A short program at addresses of its own (ASLR: no two processes share a frame), beside the long one.
    const uint64_t base = 0x7f0000000000 + 0x100000 * static_cast<uint64_t>(i);
    std::vector<Rec> recs;
    recs.push_back(task(PERF_RECORD_FORK, pid, 100, t + 1));
    recs.push_back(exec_comm(pid, "prog" + std::to_string(i), t + 2));
    recs.push_back(sample_start(pid, pid, t + 3, {kUser, base + 0x10, base + 0x20, base + 0x30}));
    recs.push_back(sample_start(pid, pid, t + 4, {kUser, base + 0x40, base + 0x20, base + 0x30}));
    recs.push_back(task(PERF_RECORD_EXIT, pid, 100, t + 5));
    recs.push_back(sample_start(100, 100, t + 6, {kUser, 0x401000, 0x402000}));
    test::Records src;
    for (Rec& r : recs) src.add(r);
    REQUIRE(recorder::feed_round(src, builder) == recs.size());
    const model::Profile w = recorder::take_window(live, builder, t, t + 1000);

    // The window has both programs' samples, with their own addresses.
    REQUIRE(w.processes.size() == 2);
    CHECK(w.processes[0].pid == 100);
    REQUIRE(w.processes[0].threads.at(0).samples.size() == 1);
    CHECK(leaf_address(w, w.processes[0].threads[0].samples[0].stack) == 0x401000);
    CHECK(w.processes[1].pid == pid);
    CHECK(w.processes[1].name == "prog" + std::to_string(i));
    const auto& samples = w.processes[1].threads.at(0).samples;
    REQUIRE(samples.size() == 2);
    CHECK(leaf_address(w, samples[0].stack) == base + 0x10);
    CHECK(leaf_address(w, samples[1].stack) == base + 0x40);
    CHECK(w.stacks.size() == 6);  // 2 + 4 (the two short stacks share their root and middle)
  }
  // Held after 200 windows of programs that came and went: no frame, stack or string of theirs (they were
  // 200 x 4 frames and 200 x 4 stacks before), and of each ended program an entry without its name.
  CHECK(live.frames.size() == 0);
  CHECK(live.stacks.size() == 0);
  CHECK(live.strings.size() == 0);
  REQUIRE(live.processes.size() == kWindows + 1);
  for (size_t i = 1; i < live.processes.size(); ++i) {
    CHECK(live.processes[i].name.empty());
    CHECK(live.processes[i].threads.empty());
  }
  CHECK(live.processes[0].name == "sh");

  // What a tracker interned before a cut is interned again after it: a loss's marker names "Lost records"
  // in the live profile's strings of now.
  std::vector<Rec> recs;
  recs.push_back(lost(100, 900000, 5));
  test::Records src;
  for (Rec& r : recs) src.add(r);
  REQUIRE(recorder::feed_round(src, builder) == 1);
  (void)recorder::take_window(live, builder, 900000, 901000);
  recs.clear();
  recs.push_back(lost(100, 902000, 7));
  test::Records again;
  for (Rec& r : recs) again.add(r);
  REQUIRE(recorder::feed_round(again, builder) == 1);
  const auto& markers = live.processes[0].threads.at(0).markers;
  REQUIRE(markers.size() == 1);
  CHECK(live.strings.get(markers[0].name) == "Lost records");
  CHECK(live.strings.get(markers[0].type) == "LostRecords");
  CHECK(live.meta.marker_schemas.size() == 1);  // the schema once, however many windows lost records
}

TEST_CASE(
    "window: what only ended programs mapped is unmapped and closed at the cut, what runs keeps its own",
    "[recorder]") {
  // Each program a binary of its own (a test suite's), each also mapping the long-lived process's binary
  // (as every program maps libc).
  test::TempDir dir;
  const std::string shell = dir.file("sh");
  std::filesystem::copy_file("/usr/bin/true", shell);
  const int kWindows = 40;
  std::vector<std::string> progs;
  for (int i = 0; i < kWindows; ++i) {
    progs.push_back(dir.file("prog" + std::to_string(i)));
    std::filesystem::copy_file("/usr/bin/true", progs.back());
  }
  model::Profile live;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::Unwinder unwinder;  // the agent's mode: the unwinder's table of binaries
  recorder::ProfileBuilder builder(live, &unwinder, events, procfs);
  const auto me = static_cast<uint32_t>(getpid());  // the long-lived process (kept files look at its /proc)
  builder.on_launched(me, "sh", 0);
  {
    std::vector<Rec> recs;
    recs.push_back(mmap2(me, 0x400000, shell, 1));
    test::Records src;
    for (Rec& r : recs) src.add(r);
    REQUIRE(recorder::feed_round(src, builder) == recs.size());
  }
  const recorder::Binary* shell_binary = &unwinder.binaries().get(shell);
  for (int i = 0; i < kWindows; ++i) {
    const uint64_t t = 1000 * static_cast<uint64_t>(i + 1);
    const uint32_t pid = 3900000 + static_cast<uint32_t>(i);
    // The last program maps the first one's binary, let go since: it is opened again.
    const std::string& prog = progs[i + 1 == kWindows ? 0 : static_cast<size_t>(i)];
    std::vector<Rec> recs;
    recs.push_back(task(PERF_RECORD_FORK, pid, me, t + 1));
    recs.push_back(exec_comm(pid, "prog", t + 2));
    recs.push_back(mmap2(pid, 0x500000, prog, t + 3));
    recs.push_back(mmap2(pid, 0x400000, shell, t + 4));
    recs.push_back(sample_start(pid, pid, t + 5, {kUser, 0x500010, 0x400020}));
    recs.push_back(task(PERF_RECORD_EXIT, pid, me, t + 6));
    test::Records src;
    for (Rec& r : recs) src.add(r);
    REQUIRE(recorder::feed_round(src, builder) == recs.size());
    CHECK(unwinder.binaries().opened() == 2);  // the long-lived process's and this program's
    CHECK(builder.libraries().kept_files() == 2);

    std::vector<UniqueFd> released;
    const model::Profile w = recorder::take_window(live, builder, t, t + 1000, &released);
    REQUIRE(w.processes.size() == 1);
    REQUIRE(w.processes[0].libs.size() == 2);
    CHECK(w.processes[0].libs[0].path == prog);
    CHECK(w.processes[0].libs[0].code_id.size() == 40);  // its ELF identity, read again for the last one
    // The ended program's binary went, its descriptor with the window (its libs may be read through it).
    CHECK(unwinder.binaries().opened() == 1);
    CHECK(builder.libraries().kept_files() == 1);
    REQUIRE(released.size() == 1);
    CHECK(released[0].valid());
  }
  // The long-lived process's binary stayed the same entry throughout (never let go, never reopened).
  CHECK(&unwinder.binaries().get(shell) == shell_binary);
  CHECK(unwinder.stats().modules == kWindows + 1);
}
