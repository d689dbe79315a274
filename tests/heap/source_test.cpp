// fxprof record --heap: the shim in real programs, the profile's Native allocation markers and Memory
// counter, and the native allocation call trees as the Firefox Profiler computes them (profiler-cli).
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

struct HeapTotals {
  uint64_t allocations = 0, frees = 0;
  int64_t allocated = 0, retained = 0;
  size_t memory_counters = 0;
  int64_t counter_sum = 0;
  std::map<int64_t, int64_t> retained_by_pid;  // pid -> bytes still allocated at the end
};

// Adds up the Native allocation markers of every thread: a block is retained when its address has no free.
HeapTotals totals(const std::string& text) {
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  HeapTotals t;
  auto add = [&](simdjson::dom::element proc) {
    for (simdjson::dom::element c : simdjson::dom::array(proc["counters"])) {
      if (std::string_view(c["category"]) != "Memory") continue;
      ++t.memory_counters;
      for (simdjson::dom::element s : simdjson::dom::array(c["samples"]["data"]))
        t.counter_sum += int64_t(simdjson::dom::array(s).at(1));
    }
    for (simdjson::dom::element th : simdjson::dom::array(proc["threads"])) {
      int64_t pid =
          th["pid"].is_string() ? std::stoll(std::string(std::string_view(th["pid"]))) : int64_t(th["pid"]);
      std::map<uint64_t, int64_t> live;
      for (simdjson::dom::element m : simdjson::dom::array(th["markers"]["data"])) {
        simdjson::dom::element data = simdjson::dom::array(m).at(5);
        if (!data.is_object() || std::string_view(data["type"]) != "Native allocation") continue;
        int64_t size = int64_t(data["size"]);
        uint64_t addr = uint64_t(data["memoryAddress"]);
        REQUIRE(data["stack"]["samples"]["data"].is_array());
        if (size > 0) {
          ++t.allocations;
          t.allocated += size;
          live[addr] = size;
        } else {
          ++t.frees;
          REQUIRE(live.count(addr) == 1);  // a free is on the allocating thread, after its allocation
          REQUIRE(live[addr] == -size);
          live.erase(addr);
        }
      }
      for (auto& [addr, size] : live) {
        t.retained += size;
        t.retained_by_pid[pid] += size;
      }
    }
  };
  add(doc);
  for (simdjson::dom::element p : simdjson::dom::array(doc["processes"])) add(p);
  return t;
}

// The bytes profiler-cli's bottom-up tree gives `function` as a root (the allocating function).
int64_t bottom_up_bytes(ProfilerCli& cli, const std::string& strategy, const std::string& function) {
  auto r = cli.cmd({"thread", "samples-bottom-up", "--strategy", strategy, "--json", "--max-lines", "1000"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, r.out);
  simdjson::dom::element tree =
      doc["invertedCallTree"].is_object() ? doc["invertedCallTree"] : doc["regularCallTree"];
  int64_t bytes = 0;
  for (simdjson::dom::element n : simdjson::dom::array(tree["children"]))
    if (std::string_view(n["name"]) == function) bytes += int64_t(n["totalSamples"].get_double().value());
  return bytes;
}

constexpr int kN = 50;
constexpr int kSize = 1000;
// The leak program's own allocations: churn 1000 x 64 (freed), peak_phase 100 x 10000 (freed), the leak.

TEST_CASE("heap full: exact leak and count and attribution in the front end", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_prog"), "leak", std::to_string(kN), std::to_string(kSize)},
                  {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The summary names the leaking function (symbolicated like the CPU samples) with its exact bytes.
  CHECK(r.err.find("48.8 KiB in 50 blocks: leak_blocks (heap_prog)") != std::string::npos);
  CHECK(r.err.find("temporary") != std::string::npos);
  auto text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  HeapTotals t = totals(text);
  // Everything the program itself allocates; the C and C++ runtimes add a few blocks of their own.
  CHECK(t.allocations >= 1000 + 100 + kN);
  CHECK(t.allocations <= 1000 + 100 + kN + 20);
  CHECK(t.retained >= kN * kSize);
  CHECK(t.memory_counters == 1);
  CHECK(t.counter_sum == t.retained);

  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  CHECK(bottom_up_bytes(cli, "native-retained-allocations", "leak_blocks") == kN * kSize);
  CHECK(bottom_up_bytes(cli, "native-allocations", "leak_blocks") == kN * kSize);
  CHECK(bottom_up_bytes(cli, "native-allocations", "churn") == 1000 * 64);
  CHECK(bottom_up_bytes(cli, "native-retained-allocations", "churn") == 0);
  CHECK(bottom_up_bytes(cli, "native-allocations", "peak_phase") == 100 * 10000);
}

TEST_CASE("heap sampled: the estimates are unbiased (within 10%)", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  // 40 MB leaked in 4 KiB blocks at one sample per 64 KiB: ~640 samples.
  constexpr int kBlocks = 10000, kBlock = 4096;
  auto r = record(out, {test_program("heap_prog"), "leak", std::to_string(kBlocks), std::to_string(kBlock)},
                  {"--heap", "--heap-rate", "65536"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));
  const double expected = double(kBlocks) * kBlock;
  CHECK(double(t.retained) > expected * 0.9);
  CHECK(double(t.retained) < expected * 1.1 + 100000);
  CHECK(t.allocations < 2000);  // sampled, not every block
  CHECK(r.err.find("leak_blocks (heap_prog)") != std::string::npos);
}

TEST_CASE("heap full: a fork+exec child's allocations are recorded", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_prog"), "forkexec", "7", "111"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));
  REQUIRE(t.retained_by_pid.size() >= 2);
  bool parent = false, child = false;
  for (auto& [pid, bytes] : t.retained_by_pid) {
    if (bytes >= 3 * 333 && bytes < 3 * 333 + 100000) parent = true;
    if (bytes >= 7 * 111) child = true;
  }
  CHECK(parent);
  CHECK(child);
  CHECK(t.memory_counters >= 2);
  CHECK(r.err.find("leak_blocks (heap_prog)") != std::string::npos);
}

TEST_CASE("heap full: 8 threads freeing each other's blocks balance to the leak", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_prog"), "threads"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));
  CHECK(t.allocations >= 8 * (1000 + 10));
  CHECK(r.err.find("78.1 KiB in 80 blocks: thread_leak (heap_prog)") != std::string::npos);
}

TEST_CASE("heap full: malloc in a signal handler does not hang", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  CmdOptions o;
  o.timeout = std::chrono::seconds(60);
  auto r = record(out, {test_program("heap_prog"), "signal"}, {"--heap=full"}, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The program only ends once its handler has run 500 times while the main loop allocates.
  CHECK(r.err.find("frees") != std::string::npos);
}

TEST_CASE("heap: clear errors for -p and bad modes", "[heap]") {
  auto r = run({fxprof_bin(), "record", "--heap", "-p", "1"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--heap records programs fxprof starts") != std::string::npos);
  r = run({fxprof_bin(), "record", "--heap=all", "--", "true"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--heap must be sampled or full") != std::string::npos);
}

}  // namespace
}  // namespace fxprof::test
