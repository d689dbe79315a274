// recorder/libraries.h: executable mappings (MMAP2 records, the /proc/PID/maps snapshot when attaching)
// become libs, a fork copies them, an exec drops them, and after a loss a sample is checked against them.
// Synthetic records through the RecordSource boundary (tests/recorder/synthetic.h): no perf, no root.
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

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

const uint64_t kUser = static_cast<uint64_t>(PERF_CONTEXT_USER);
const std::string kBinary = "/usr/bin/true";  // any ELF file with a build ID (coreutils)

Rec mmap2(uint32_t pid, uint64_t addr, uint64_t len, uint32_t prot, const std::string& path, uint64_t time) {
  struct stat st {};
  ::stat(path.c_str(), &st);  // a missing file (anonymous code) leaves 0s
  Rec r(PERF_RECORD_MMAP2);
  r.u32x2(pid, pid).u64(addr).u64(len).u64(0).u32x2(major(st.st_dev), minor(st.st_dev)).u64(st.st_ino).u64(0);
  r.u32x2(prot, MAP_PRIVATE).str(path).trailer(pid, pid, time);
  return r;
}

Rec task(uint32_t type, uint32_t pid, uint32_t ppid, uint64_t time) {
  Rec r(type);
  r.u32x2(pid, ppid).u32x2(pid, ppid).u64(time).trailer(pid, pid, time);
  return r;
}

Rec exec(uint32_t pid, const std::string& name, uint64_t time) {
  Rec r(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
  r.u32x2(pid, pid).str(name).trailer(pid, pid, time);
  return r;
}

Rec lost(uint32_t pid, uint64_t time) {
  Rec r(PERF_RECORD_LOST);
  r.u64(1).u64(3).trailer(pid, pid, time);
  return r;
}

void feed(recorder::ProfileBuilder& builder, std::vector<Rec>& recs) {
  test::Records src;
  for (Rec& r : recs) src.add(r);
  REQUIRE(recorder::feed_round(src, builder) == recs.size());
}

std::string root_name(const model::Profile& p, model::StackId id) {
  model::StackId root = id;
  while (p.stacks.prefix(root) != model::kNoStack) root = p.stacks.prefix(root);
  const model::Frame& f = p.frames.get(p.stacks.frame(root));
  return f.name == model::kNoString ? "" : std::string(p.strings.get(f.name));
}

// A /proc whose /proc/PID/maps maps kBinary at 0x400000 (executable) and a data page.
class MapsProcfs final : public recorder::Procfs {
 public:
  Result<std::string> read(const std::string& path) override {
    if (!path.ends_with("/maps")) return Err(path + ": none");
    struct stat st {};
    ::stat(kBinary.c_str(), &st);
    char dev[32];
    std::snprintf(dev, sizeof dev, "%02x:%02x", major(st.st_dev), minor(st.st_dev));
    return "00400000-00401000 r-xp 00000000 " + std::string(dev) + " " + std::to_string(st.st_ino) + " " +
           kBinary + "\n00600000-00601000 rw-p 00000000 00:00 0 [heap]\n";
  }
  std::vector<uint32_t> list(const std::string&) override { return {}; }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t>) override { return {}; }
};

}  // namespace

TEST_CASE("libraries: executable file mappings become libs, a fork copies them, an exec drops them",
          "[recorder]") {
  const auto me = static_cast<uint32_t>(getpid());  // kept files look at its /proc
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  builder.on_launched(me, "sh", 0);
  std::vector<Rec> recs;
  recs.push_back(mmap2(me, 0x400000, 0x1000, PROT_READ | PROT_EXEC, kBinary, 1));
  recs.push_back(mmap2(me, 0x600000, 0x1000, PROT_READ, kBinary, 2));                // not executable: no lib
  recs.push_back(mmap2(me, 0x700000, 0x1000, PROT_EXEC, "/nonexistent/lib.so", 3));  // no ELF: no lib
  recs.push_back(task(PERF_RECORD_FORK, 200, me, 4));  // the child has its parent's libs
  recs.push_back(exec(200, "prog", 5));                // no samples yet: its entry stays, its libs go
  recs.push_back(task(PERF_RECORD_FORK, 300, me, 6));
  feed(builder, recs);

  REQUIRE(profile.processes.size() == 3);
  const model::Process& sh = profile.processes[0];
  REQUIRE(sh.libs.size() == 1);
  CHECK(sh.libs[0].name == "true");
  CHECK(sh.libs[0].path == kBinary);
  CHECK((sh.libs[0].start == 0x400000 && sh.libs[0].end == 0x401000));
  CHECK(sh.libs[0].code_id.size() == 40);  // the ELF identity's build ID
  CHECK(sh.libs[0].read_path.empty());     // still at its path
  const model::Process& prog = profile.processes[1];
  CHECK((prog.pid == 200 && prog.name == "prog"));
  CHECK(prog.libs.empty());
  const model::Process& child = profile.processes[2];
  REQUIRE(child.pid == 300);
  REQUIRE(child.libs.size() == 1);
  CHECK(child.libs[0].path == kBinary);
  CHECK(builder.take_kept_files().size() == 1);  // one descriptor for the mapped file
}

TEST_CASE("libraries: after a loss, samples in a lib or in code without a file are known, others marked",
          "[recorder]") {
  const auto me = static_cast<uint32_t>(getpid());  // kept files look at its /proc
  model::Profile profile;
  recorder::EventConfig events;
  test::NoProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  builder.on_launched(me, "node", 0);
  std::vector<Rec> recs;
  recs.push_back(mmap2(me, 0x400000, 0x1000, PROT_READ | PROT_EXEC, kBinary, 1));
  recs.push_back(mmap2(me, 0x900000, 0x1000, PROT_READ | PROT_EXEC, "//anon", 2));  // JIT code
  recs.push_back(lost(me, 3));
  recs.push_back(sample_start(me, me, 10, {kUser, 0x400100}));
  recs.push_back(sample_start(me, me, 11, {kUser, 0x900100}));
  recs.push_back(sample_start(me, me, 12, {kUser, 0xa00100}));
  recs.push_back(task(PERF_RECORD_FORK, 200, me, 13));  // the child knows its parent's code too
  recs.push_back(sample_start(200, 200, 14, {kUser, 0x900100}));
  recs.push_back(exec(200, "prog", 15));  // after samples: a new entry that knows none of it
  recs.push_back(sample_start(200, 200, 16, {kUser, 0x900100}));
  feed(builder, recs);

  REQUIRE(profile.processes.size() == 3);
  const auto& node = profile.processes[0].threads.at(0).samples;
  REQUIRE(node.size() == 3);
  CHECK(root_name(profile, node[0].stack).empty());
  CHECK(root_name(profile, node[1].stack).empty());
  CHECK(root_name(profile, node[2].stack) == "(unknown code: records lost)");
  const auto& child = profile.processes[1].threads.at(0).samples;
  REQUIRE(child.size() == 1);
  CHECK(root_name(profile, child[0].stack).empty());
  const auto& prog = profile.processes[2].threads.at(0).samples;
  REQUIRE(prog.size() == 1);
  CHECK(root_name(profile, prog[0].stack) == "(unknown code: records lost)");
  CHECK(builder.unknown_code_samples() == 2);
  CHECK(builder.unknown_code_processes() == 2);
}

TEST_CASE("libraries: attaching reads the executable mappings of /proc/PID/maps, MMAP2 does not repeat them",
          "[recorder]") {
  const auto me = static_cast<uint32_t>(getpid());  // kept files look at its /proc
  model::Profile profile;
  recorder::EventConfig events;
  MapsProcfs procfs;
  recorder::ProfileBuilder builder(profile, nullptr, events, procfs);
  builder.on_attached(me, 0);
  std::vector<Rec> recs;
  recs.push_back(mmap2(me, 0x400000, 0x1000, PROT_READ | PROT_EXEC, kBinary, 1));  // the same mapping
  feed(builder, recs);
  REQUIRE(profile.processes.size() == 1);
  REQUIRE(profile.processes[0].libs.size() == 1);
  CHECK(profile.processes[0].libs[0].path == kBinary);
  CHECK(profile.processes[0].libs[0].start == 0x400000);
}
