// tests for counters/count_sink.h: `fxprof stat`'s counting sink fed synthetic records through the driver's
// perf buffers source, as its ring buffers would hand them out.
#include "counters/count_sink.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "driver/sources.h"
#include "tests/perf/perf_bytes.h"

using namespace fxprof;
using test::Bytes;

namespace {

// Records in memory, in the order added, as one ring buffer would give them (stat's carry no time).
class Buffer final : public driver::RecordSource {
 public:
  void add(const std::string& bytes) {
    std::vector<uint64_t> w((bytes.size() + 7) / 8);
    std::memcpy(w.data(), bytes.data(), bytes.size());
    records_.push_back(std::move(w));
  }
  void collect(std::vector<driver::RecordRef>& out, uint64_t) override {
    for (const auto& w : records_)
      out.push_back({0, reinterpret_cast<const perf_event_header*>(w.data()), false});
  }
  void release() override { records_.clear(); }

 private:
  std::vector<std::vector<uint64_t>> records_;
};

// PERF_RECORD_READ as stat's events write it (read_format ENABLED | RUNNING | ID, no sample_id trailer).
std::string read_rec(uint32_t pid, uint32_t tid, uint64_t value, uint64_t id) {
  return Bytes().u32x2(pid, tid).u64(value).u64(1000).u64(1000).u64(id).record(PERF_RECORD_READ);
}
std::string fork_rec(uint32_t pid, uint32_t ppid, uint32_t tid) {
  return Bytes().u32x2(pid, ppid).u32x2(tid, ppid).u64(0).record(PERF_RECORD_FORK);
}
std::string comm_rec(uint32_t pid, const std::string& name, bool exec) {
  Bytes b;
  b.u32x2(pid, pid).str(name);
  return b.record(PERF_RECORD_COMM, exec ? PERF_RECORD_MISC_COMM_EXEC : 0);
}

perf::Layout stat_layout() {
  perf::EventAttr a;
  a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID;
  return perf::Layout({a});
}

}  // namespace

TEST_CASE("count sink: each exiting thread's counts summed per process, named by fork and exec",
          "[counters]") {
  // Two events: ids 7 and 8 are event 0's (one per CPU), 9 is event 1's.
  counters::CountSink sink(2, stat_layout(), {{7, 0}, {8, 0}, {9, 1}});
  sink.on_launched(100, "sh", 0);
  Buffer cpu0;
  // A child's thread reports before the fork that names it reached us (another CPU's buffer): counted, and
  // named after its parent when the fork comes.
  cpu0.add(read_rec(300, 301, 5, 9));
  cpu0.add(fork_rec(200, 100, 200));  // sh forks 200: "sh" until its exec
  cpu0.add(read_rec(200, 202, 40, 7));
  cpu0.add(fork_rec(100, 100, 101));  // a thread of sh: no new process
  cpu0.add(comm_rec(200, "python3", true));
  cpu0.add(read_rec(200, 200, 2, 8));
  cpu0.add(read_rec(200, 200, 1, 9));
  cpu0.add(read_rec(200, 200, 1000, 42));  // an id of no counted event
  cpu0.add(fork_rec(300, 200, 300));
  cpu0.add(Bytes().u64(1).u64(3).record(PERF_RECORD_LOST));
  CHECK(driver::feed_round(cpu0, sink) == 10);

  const std::vector<counters::ProcessCounts> p = sink.processes();
  REQUIRE(p.size() == 3);
  CHECK(p[0].pid == 100);
  CHECK(p[0].name == "sh");
  CHECK(p[0].values == std::vector<uint64_t>{0, 0});
  // 300 was seen (its count) before 200's fork was: listed by first appearance.
  CHECK(p[1].pid == 300);
  CHECK(p[1].name == "python3");  // its parent's name at its fork
  CHECK(p[1].values == std::vector<uint64_t>{0, 5});
  CHECK(p[2].pid == 200);
  CHECK(p[2].name == "python3");
  CHECK(p[2].values == std::vector<uint64_t>{42, 1});
  CHECK(sink.lost() == 1);
  CHECK(sink.reported() == std::vector<uint64_t>{42, 6});

  // The launched process's own share is added by stat (the total less what the others reported).
  sink.add(100, std::vector<uint64_t>{8, 0});
  CHECK(sink.processes()[0].values == std::vector<uint64_t>{8, 0});
}
