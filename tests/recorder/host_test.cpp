// recorder/host.h: the live /proc through the Procfs interface (what the builder and the RSS sampler read),
// and feed_round merging two buffers' records by time into the builder.
#include "recorder/host.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "model/profile.h"
#include "recorder/builder.h"
#include "recorder/perf.h"

using namespace fxprof;

TEST_CASE("live procfs: files, task lists, kernel function names", "[recorder]") {
  recorder::Procfs& proc = recorder::live_procfs();
  auto comm = proc.read("/proc/self/comm");
  REQUIRE(comm.ok());
  CHECK(comm.value() == "test_recorder_h\n");  // comm keeps 15 characters of test_recorder_host
  CHECK(!proc.read("/proc/999999999/comm").ok());

  // A second thread, alive while the list is read.
  std::promise<void> ready, done;
  std::thread t([&] {
    ready.set_value();
    done.get_future().wait();
  });
  ready.get_future().wait();
  auto tasks = proc.list("/proc/self/task");
  done.set_value();
  t.join();
  CHECK(std::find(tasks.begin(), tasks.end(), static_cast<uint32_t>(getpid())) != tasks.end());
  CHECK(tasks.size() >= 2);
  CHECK(proc.list("/proc/999999999/task").empty());

  // "schedule" from kallsyms itself (the tests run as root: addresses show), asked 8 bytes inside.
  std::ifstream in("/proc/kallsyms");
  std::string line;
  uint64_t schedule = 0;
  while (std::getline(in, line))
    if (line.size() > 19 && line.compare(16, 11, " T schedule") == 0 && line.size() == 27)
      schedule = std::stoull(line.substr(0, 16), nullptr, 16);
  REQUIRE(schedule != 0);
  const uint64_t addrs[] = {1, schedule + 8};
  auto names = proc.kernel_symbols(addrs);
  REQUIRE(names.size() == 2);
  CHECK(names[0].empty());  // below every kernel symbol
  CHECK(names[1] == "schedule");
}

namespace {

// Records handed out from memory, as two ring buffers would: each buffer in its own time order.
class Buffers final : public recorder::RecordSource {
 public:
  std::vector<std::vector<uint64_t>> records;  // each an 8-byte aligned record
  std::vector<bool> from_switch_buffer;
  int released = 0;
  void collect(std::vector<recorder::RecordRef>& out, uint64_t) override {
    for (size_t i = 0; i < records.size(); ++i) {
      auto* h = reinterpret_cast<const perf_event_header*>(records[i].data());
      out.push_back({recorder::record_time(h), h, from_switch_buffer[i]});
    }
  }
  void release() override { ++released; }
};

// A PERF_RECORD_SAMPLE of the frame-pointer layout (ip, pid/tid, time, cpu, period, callchain of one).
std::vector<uint64_t> sample(uint32_t pid, uint32_t tid, uint64_t time, uint64_t ip) {
  std::vector<uint64_t> r(9);
  perf_event_header h{PERF_RECORD_SAMPLE, 0, static_cast<uint16_t>(r.size() * 8)};
  std::memcpy(r.data(), &h, sizeof h);
  r[1] = ip;
  r[2] = pid | (uint64_t{tid} << 32);
  r[3] = time;
  r[4] = 0;     // cpu
  r[5] = 1000;  // period
  r[6] = 2;     // callchain: PERF_CONTEXT_USER, ip
  r[7] = static_cast<uint64_t>(PERF_CONTEXT_USER);
  r[8] = ip;
  return r;
}

}  // namespace

TEST_CASE("feed_round: records of several buffers reach the builder in time order, then are released",
          "[recorder]") {
  model::Profile profile;
  recorder::EventConfig events;
  recorder::ProfileBuilder builder(profile, nullptr, events, recorder::live_procfs());
  builder.on_launched(100, "prog", 0);
  Buffers src;
  // Buffer one holds times 30 and 10's later neighbour; buffer two 20: handled 10, 20, 30.
  src.records = {sample(100, 100, 10, 0x1010), sample(100, 100, 30, 0x1030), sample(100, 100, 20, 0x1020)};
  src.from_switch_buffer = {false, false, false};
  CHECK(recorder::feed_round(src, builder) == 3);
  CHECK(src.released == 1);
  REQUIRE(profile.processes.size() == 1);
  const auto& samples = profile.processes[0].threads.at(0).samples;
  REQUIRE(samples.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(samples[i].time_ns == 10 * (i + 1));
    CHECK(profile.frames.get(profile.stacks.frame(samples[i].stack)).address == 0x1010 + 0x10 * i);
  }
}
