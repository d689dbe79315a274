// recorder/jit_code.h, the builder's JIT code tracker: synthetic MMAP2, sample, COMM and EXIT records through
// the RecordSource boundary (tests/recorder/synthetic.h) into a ProfileBuilder, with a /proc that knows
// nothing and perf maps written here (owned by us, as the recorded process's would be); no perf, no root
// needed, no timing (the reading rounds' clock is given).
#include "recorder/jit_code.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "model/profile.h"
#include "model/symbols.h"
#include "recorder/builder.h"
#include "tests/recorder/synthetic.h"

using namespace fxprof;
using test::Rec;
using test::sample_start;

namespace {

const uint64_t kUser = static_cast<uint64_t>(PERF_CONTEXT_USER);

// A pid no process has (pid_max is at most 2^22): its perf map is ours to write.
constexpr uint32_t kPid = 4000000 + 77;

Rec anon_code(uint32_t pid, uint64_t addr, uint64_t len, uint64_t time) {
  Rec m(PERF_RECORD_MMAP2);
  m.u32x2(pid, pid).u64(addr).u64(len).u64(0).u32x2(0, 0).u64(0).u64(0).u32x2(PROT_READ | PROT_EXEC, 0);
  m.str("//anon").trailer(pid, pid, time);
  return m;
}

Rec exit_record(uint32_t pid, uint64_t time) {
  Rec r(PERF_RECORD_EXIT);
  r.u32x2(pid, pid).u32x2(pid, pid).u64(time).trailer(pid, pid, time);
  return r;
}

struct PerfMap {
  std::string path = "/tmp/perf-" + std::to_string(kPid) + ".map";
  explicit PerfMap(const std::string& text) { write(text); }
  ~PerfMap() { unlink(path.c_str()); }
  void write(const std::string& text) const {
    std::ofstream(path, std::ios::trunc) << text;
    chmod(path.c_str(), 0644);
  }
  void append(const std::string& text) const { std::ofstream(path, std::ios::app) << text; }
};

size_t feed(recorder::ProfileBuilder& builder, std::vector<Rec>& recs) {
  test::Records src;
  for (Rec& r : recs) src.add(r);
  return recorder::feed_round(src, builder);
}

std::string leaf_name(const model::Profile& p, const model::Sample& s) {
  const model::Frame& f = p.frames.get(p.stacks.frame(s.stack));
  return f.name == model::kNoString ? "" : std::string(p.strings.get(f.name));
}

}  // namespace

TEST_CASE(
    "JIT code tracker: a process's perf map is read when its last thread exits, once, and names its "
    "samples",
    "[recorder]") {
  PerfMap map("7f0000001000 100 js:hot\n");
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  builder.on_launched(kPid, "node", 0);
  std::vector<Rec> recs;
  recs.push_back(anon_code(kPid, 0x7f0000000000, 0x10000, 10));
  recs.push_back(sample_start(kPid, kPid, 20, {kUser, 0x7f0000001010}));
  recs.push_back(exit_record(kPid, 30));
  REQUIRE(feed(builder, recs) == 3);
  CHECK(builder.jit_functions() == 1);       // read at the exit
  map.write("7f0000001000 100 js:other\n");  // the pid is reused: not this process's map any more
  builder.on_end(40);
  model::name_jit_frames(profile);  // the "jit names" pass that follows every source (passes/passes.h)

  CHECK(builder.jit_functions() == 1);
  const model::Process& proc = profile.processes.at(0);
  REQUIRE(proc.jit.size() == 1);
  CHECK(proc.jit[0].name == "js:hot");
  CHECK(proc.jit_source == map.path);
  REQUIRE(proc.threads.at(0).samples.size() == 1);
  CHECK(leaf_name(profile, proc.threads[0].samples[0]).find("js:hot") != std::string::npos);
}

TEST_CASE(
    "JIT code tracker: a perf map is followed every round once the process has JIT code, its lines "
    "stamped with the round before them; an exec forgets it",
    "[recorder]") {
  PerfMap map("7f0000001000 100 js:first\n");
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  builder.on_launched(kPid, "node", 0);
  builder.tick(100);  // no JIT code yet: not followed, so its first line has no time yet
  std::vector<Rec> recs;
  recs.push_back(anon_code(kPid, 0x7f0000000000, 0x10000, 150));
  recs.push_back(sample_start(kPid, kPid, 160, {kUser, 0x7f0000001010}));
  feed(builder, recs);
  builder.tick(200);  // followed from here: its first line was there before
  map.append("7f0000002000 100 js:second\n");
  builder.tick(300);  // the new line appeared after the look at 200
  builder.on_end(400);

  const model::Process& proc = profile.processes.at(0);
  REQUIRE(proc.jit.size() == 2);
  CHECK((proc.jit[0].name == "js:first" && proc.jit[0].from_ns == 0));
  CHECK((proc.jit[1].name == "js:second" && proc.jit[1].from_ns == 200));

  // The same program again, but it execs before the map gains a line: the new program's code is not
  // followed until it maps JIT code itself, and the map is read whole at the end.
  model::Profile p2;
  recorder::ProfileBuilder b2(p2, nullptr, events, procfs);
  map.write("7f0000001000 100 js:first\n");
  b2.on_launched(kPid, "node", 0);
  std::vector<Rec> r2;
  r2.push_back(anon_code(kPid, 0x7f0000000000, 0x10000, 150));
  Rec exec(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
  exec.u32x2(kPid, kPid).str("other").trailer(kPid, kPid, 170);
  r2.push_back(exec);
  r2.push_back(sample_start(kPid, kPid, 180, {kUser, 0x7f0000001010}));
  feed(b2, r2);
  b2.tick(200);
  map.append("7f0000002000 100 js:second\n");
  b2.tick(300);
  b2.on_end(400);
  const model::Process& proc2 = p2.processes.back();
  REQUIRE(proc2.jit.size() == 2);
  CHECK((proc2.jit[0].from_ns == 0 && proc2.jit[1].from_ns == 0));  // read whole at the end, not followed
}
