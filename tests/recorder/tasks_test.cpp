// The builder's processes and threads (recorder/tasks.h): FORK, COMM and EXIT records, synthetic, through
// the RecordSource boundary (tests/recorder/synthetic.h) with a /proc that knows nothing: no perf, no root.
#include "recorder/tasks.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "model/profile.h"
#include "recorder/builder.h"
#include "recorder/libraries.h"
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
  REQUIRE(recorder::feed_round(src, builder) == recs.size());

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

TEST_CASE("tasks: a thread's records read before its fork are its entry, the fork adopts it",
          "[recorder][tasks]") {
  // Each CPU's buffer is read in turn: a fork the kernel published late comes a round after the rename
  // and sample (other CPUs) that followed it.
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  builder.on_launched(100, "sh", 0);
  const uint64_t user = static_cast<uint64_t>(PERF_CONTEXT_USER);
  std::vector<Rec> first, second;
  first.push_back(comm(100, 101, "worker", 11, false));  // thread 101's rename
  first.push_back(sample_start(100, 101, 12, {user, 0x401000}));
  first.push_back(sample_start(100, 102, 40, {user, 0x401000}));  // a thread whose fork and exit were lost
  second.push_back(task(PERF_RECORD_FORK, 100, 100, 101, 100, 10));
  second.push_back(task(PERF_RECORD_FORK, 100, 100, 102, 100, 50));  // its tid reused later: a new thread
  for (std::vector<Rec>* round : {&first, &second}) {
    test::Records src;
    for (Rec& r : *round) src.add(r);
    REQUIRE(recorder::feed_round(src, builder) == round->size());
  }
  REQUIRE(profile.processes.size() == 1);
  const model::Process& sh = profile.processes[0];
  REQUIRE(sh.threads.size() == 4);
  CHECK((sh.threads[1].tid == 101 && sh.threads[1].name == "worker" && sh.threads[1].start_ns == 10));
  CHECK(sh.threads[1].samples.size() == 1);
  CHECK((sh.threads[2].tid == 102 && sh.threads[2].start_ns == 40 && sh.threads[2].samples.size() == 1));
  CHECK((sh.threads[3].tid == 102 && sh.threads[3].start_ns == 50));
}

namespace {

recorder::ForkRecord fork_of(uint32_t pid, uint32_t ppid, uint32_t tid, uint32_t ptid, uint64_t time) {
  recorder::ForkRecord f;
  f.pid = pid;
  f.ppid = ppid;
  f.tid = tid;
  f.ptid = ptid;
  f.time = time;
  return f;
}

}  // namespace

TEST_CASE("tasks: the task tracker tells the builder what ended, in order, and serves the context's views",
          "[recorder]") {
  // The tracker alone, typed records in, its hooks recorded: what the builder's trackers and libraries
  // are told, and when the stacks of a pid are released.
  model::Profile profile;
  test::NoProcfs procfs;
  std::vector<std::string> told;
  recorder::TaskTracker tasks(
      profile, procfs,
      {[&](uint32_t pid) { told.push_back("forget process " + std::to_string(pid)); },
       [&](uint32_t tid) { told.push_back("forget thread " + std::to_string(tid)); },
       [&](uint32_t pid, uint64_t t, recorder::Release why) {
         told.push_back(std::string(why == recorder::Release::Exec ? "exec" : "exit") + " release " +
                        std::to_string(pid) + " before " + std::to_string(t));
       },
       [&](uint32_t pid) { told.push_back("ended " + std::to_string(pid)); }, [] { return uint64_t{0}; }});
  tasks.launched(100, "sh", 0);
  tasks.on_fork(fork_of(100, 100, 101, 100, 10));  // a thread
  tasks.on_fork(fork_of(200, 100, 200, 101, 12));  // a child process
  tasks.thread(200, 200, 13);                      // a sample's: known already
  recorder::CommRecord ex;
  ex.pid = ex.tid = 200;
  ex.exec = true;
  ex.comm = "gzip";
  ex.time = 20;
  tasks.on_comm(ex);  // no samples yet: the same entry
  recorder::ExitRecord ex1;
  static_cast<recorder::TaskRecord&>(ex1) = fork_of(200, 100, 200, 101, 30);
  tasks.on_exit(ex1);

  CHECK(told == std::vector<std::string>{"forget process 100", "forget thread 100", "forget thread 101",
                                         "forget process 200", "forget thread 200",
                                         "exec release 200 before 20", "forget thread 200",
                                         "exit release 200 before 30", "ended 200"});
  REQUIRE(tasks.process_of(200) == &profile.processes.at(1));
  CHECK(profile.processes[1].name == "gzip");
  CHECK(profile.processes[1].end_ns == 30);
  CHECK(tasks.thread_of(101) == &profile.processes[0].threads.at(1));
  CHECK(tasks.thread_of(200) == nullptr);  // exited
  std::vector<uint32_t> pids, tids;
  tasks.for_each_process([&](uint32_t pid) { pids.push_back(pid); });
  tasks.for_each_thread([&](uint32_t tid) { tids.push_back(tid); });
  std::sort(pids.begin(), pids.end());
  std::sort(tids.begin(), tids.end());
  CHECK(pids == std::vector<uint32_t>{100, 200});
  CHECK(tids == std::vector<uint32_t>{100, 101});
  CHECK(tasks.new_pids() == std::vector<uint32_t>{100, 200});
}

TEST_CASE("trackers: one ordered list, the task tracker first, the libraries second, the views the tasks'",
          "[recorder]") {
  // make_trackers alone: the context's views are empty until the task tracker serves them.
  model::Profile profile;
  test::NoProcfs procfs;
  recorder::TrackerContext context{profile, procfs, {}, {}, {}, {}, {}, {}, nullptr, false, {}};
  std::vector<std::unique_ptr<recorder::Tracker>> list;
  recorder::FirstTrackers first = recorder::make_trackers(context, list);
  REQUIRE(list.size() >= 2);
  CHECK(list[0].get() == &first.tasks);  // each record registers its process and thread first
  CHECK(static_cast<recorder::Tracker*>(&first.libs) == list[1].get());  // then its mappings
  REQUIRE(context.thread_of);
  REQUIRE(context.process_of);

  // The views answer from the task tracker; a sample's thread is registered by it.
  first.tasks.launched(100, "sh", 0);
  recorder::SampleRecord s;
  s.pid = 100;
  s.tid = 101;
  s.time = 5;
  for (const auto& t : list) t->on_sample(s);
  REQUIRE(context.process_of(100) == &profile.processes.at(0));
  REQUIRE(context.thread_of(101) == &profile.processes[0].threads.at(1));
  CHECK(profile.processes[0].threads[1].name == "Thread 101");  // no /proc: named by its tid
  std::vector<uint32_t> tids;
  context.for_each_thread([&](uint32_t tid) { tids.push_back(tid); });
  std::sort(tids.begin(), tids.end());
  CHECK(tids == std::vector<uint32_t>{100, 101});
  size_t pids = 0;
  context.for_each_process([&](uint32_t) { ++pids; });
  CHECK(pids == 1);
}

TEST_CASE("tasks: an interpreter's process is named with its script", "[recorder][tasks]") {
  using fxprof::recorder::name_with_script;
  CHECK(name_with_script("python3", {"/usr/bin/python3", "-u", "/tmp/x/t.py", "a"}) == "python3 t.py");
  CHECK(name_with_script("python3.11", {"python3.11", "-W", "ignore", "t.py"}) == "python3.11 t.py");
  CHECK(name_with_script("python3", {"python3", "-m", "http.server"}) == "python3 -m http.server");
  CHECK(name_with_script("node", {"node", "--max-old-space-size=100", "server.js"}) == "node server.js");
  CHECK(name_with_script("python3", {"python3", "-c", "print(1)"}) == "python3");
  CHECK(name_with_script("sh", {"sh", "-c", "echo hi"}) == "sh");
  CHECK(name_with_script("python3", {"python3"}) == "python3");
  CHECK(name_with_script("gzip", {"gzip", "-9", "file"}) == "gzip");  // not an interpreter
  CHECK(name_with_script("shred", {"shred", "file"}) == "shred");
}
