// The builder's processes and threads (builder_process.cpp): FORK, COMM and EXIT records, synthetic, through
// the RecordSource boundary (tests/recorder/synthetic.h) with a /proc that knows nothing: no perf, no root.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/builder.h"
#include "tests/recorder/synthetic.h"

using namespace fxprof;
using test::Rec;
using test::sample_start;

namespace {

Rec task(uint32_t type, uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid, uint64_t time) {
  Rec r(type);
  r.u32x2(pid, ppid).u32x2(tid, ptid).u64(time).trailer(pid, tid, time);
  return r;
}

Rec comm(uint32_t pid, uint32_t tid, const std::string& name, uint64_t time, bool exec) {
  Rec r(PERF_RECORD_COMM, exec ? PERF_RECORD_MISC_COMM_EXEC : 0);
  r.u32x2(pid, tid).str(name).trailer(pid, tid, time);
  return r;
}

}  // namespace

TEST_CASE("tasks: forks, renames, execs and exits shape processes and threads", "[recorder]") {
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  builder.on_launched(100, "sh", 0);
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  std::vector<Rec> recs;
  recs.push_back(comm(100, 100, "python3", 5, true));  // the launched program's exec keeps its entry and name
  recs.push_back(task(PERF_RECORD_FORK, 100, 100, 101, 100, 10));  // a thread
  recs.push_back(comm(100, 101, "worker", 11, false));             // renamed
  recs.push_back(task(PERF_RECORD_FORK, 200, 100, 200, 101, 12));  // a child process, named after its parent
  recs.push_back(sample_start(200, 200, 15, {user, 0x401000}));
  recs.push_back(comm(200, 200, "gzip", 20, true));  // an exec after samples: a new entry from then on
  recs.push_back(sample_start(200, 200, 25, {user, 0x401000}));
  recs.push_back(task(PERF_RECORD_EXIT, 100, 100, 101, 100, 30));  // the thread ends
  test::Records src;
  for (Rec& r : recs) src.add(r);
  std::vector<recorder::RecordRef> refs;
  REQUIRE(recorder::feed_round(src, builder, refs) == recs.size());

  REQUIRE(profile.processes.size() == 3);
  const model::Process& sh = profile.processes[0];
  CHECK(sh.pid == 100);
  CHECK(sh.name == "sh");
  REQUIRE(sh.threads.size() == 2);
  CHECK(sh.threads[1].tid == 101);
  CHECK(sh.threads[1].name == "worker");
  CHECK(sh.threads[1].end_ns == 30);
  CHECK_FALSE(sh.threads[0].end_ns);
  CHECK(sh.threads[0].name == "python3");  // the main thread is named by its comm
  const model::Process& child = profile.processes[1];
  CHECK((child.pid == 200 && child.name == "sh"));
  CHECK(child.end_ns == 20);
  REQUIRE(child.threads.size() == 1);
  CHECK(child.threads[0].samples.size() == 1);
  const model::Process& gzip = profile.processes[2];
  CHECK((gzip.pid == 200 && gzip.name == "gzip" && gzip.start_ns == 20));
  REQUIRE(gzip.threads.size() == 1);
  CHECK(gzip.threads[0].samples.size() == 1);
  CHECK(builder.samples() == 2);
}
