// fxprof record --heap: the shim in real programs, the profile's Native allocation markers and Memory
// counter, and the native allocation call trees as the Firefox Profiler computes them (profiler-cli).
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
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
  int64_t counter_max = 0;                     // the highest value a Memory counter reaches (one process)
  std::map<int64_t, int64_t> retained_by_pid;  // pid -> bytes still allocated at the end
  std::map<int64_t, std::map<int64_t, uint64_t>> by_size;  // pid -> size (negative: frees) -> markers
  // Live bytes just before the first allocation of `first_size` (-1: not seen), per thread in time order.
  int64_t first_size = 0, live_before_first = -1;
};

// Adds up the Native allocation markers of every thread: a block is retained when its address has no free.
HeapTotals totals(const std::string& text, int64_t first_size = 0) {
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  HeapTotals t;
  t.first_size = first_size;
  auto add = [&](simdjson::dom::element proc) {
    for (simdjson::dom::element c : simdjson::dom::array(proc["counters"])) {
      if (std::string_view(c["name"]) != "Heap") continue;  // the heap counter (not RSS)
      ++t.memory_counters;
      int64_t value = 0;
      for (simdjson::dom::element s : simdjson::dom::array(c["samples"]["data"])) {
        value += int64_t(simdjson::dom::array(s).at(1));
        t.counter_max = std::max(t.counter_max, value);
      }
      t.counter_sum += value;
    }
    for (simdjson::dom::element th : simdjson::dom::array(proc["threads"])) {
      int64_t pid =
          th["pid"].is_string() ? std::stoll(std::string(std::string_view(th["pid"]))) : int64_t(th["pid"]);
      std::map<uint64_t, int64_t> live;
      int64_t live_bytes = 0;
      for (simdjson::dom::element m : simdjson::dom::array(th["markers"]["data"])) {
        simdjson::dom::element data = simdjson::dom::array(m).at(5);
        if (!data.is_object() || std::string_view(data["type"]) != "Native allocation") continue;
        int64_t size = int64_t(data["size"]);
        uint64_t addr = uint64_t(data["memoryAddress"]);
        REQUIRE(data["stack"]["samples"]["data"].is_array());
        // A row stands for `count` blocks of one stack and time bucket (heap/source.cpp): by block size.
        const int64_t count =
            data["count"].is_uint64() || data["count"].is_int64() ? int64_t(data["count"]) : 1;
        REQUIRE(count >= 1);
        t.by_size[pid][size / count] += count;
        if (size / count == t.first_size && t.live_before_first < 0) t.live_before_first = live_bytes;
        live_bytes += size;
        if (size > 0) {
          t.allocations += uint64_t(count);
          t.allocated += size;
          live[addr] = size;
        } else {
          t.frees += uint64_t(count);
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

// The bytes profiler-cli's function list gives `function` (its total: its own allocations and those of what
// it calls) under a native allocation strategy; 0 when the function is not in the list.
int64_t function_bytes(ProfilerCli& cli, const std::string& strategy, const std::string& function) {
  auto r = cli.cmd({"thread", "functions", "--strategy", strategy, "--json", "--limit", "0"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, r.out);
  int64_t bytes = 0;
  for (simdjson::dom::element f : simdjson::dom::array(doc["functions"]))
    if (std::string_view(f["name"]) == function) bytes += int64_t(f["totalSamples"].get_double().value());
  return bytes;
}

// The number in the summary line after `label` (e.g. "allocations" -> "fxprof: heap: 123 allocations").
int64_t summary_number(const std::string& err, const std::string& before, const std::string& after) {
  size_t end = err.find(after);
  if (end == std::string::npos) return -1;
  size_t start = err.rfind(before, end);
  if (start == std::string::npos) return -1;
  start += before.size();
  return std::stoll(err.substr(start, end - start));
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

// `fxprof report --heap --json --limit 100 FILE`'s heap object, parsed into `parser`.
simdjson::dom::element heap_report(simdjson::dom::parser& parser, const std::string& file,
                                   std::string& text) {
  auto r = run({fxprof_bin(), "report", "--heap", "--json", "--limit", "100", file});
  INFO(r.err);
  REQUIRE(r.status == 0);
  text = r.out;
  return parse_json(parser, text)["heap"];
}

struct JsonSite {
  int64_t bytes = -1, count = -1;
  std::vector<std::string> path;
};
JsonSite site(simdjson::dom::element heap, const char* list, const std::string& name) {
  JsonSite out;
  for (simdjson::dom::element s : simdjson::dom::array(heap[list])) {
    if (std::string_view(s["name"]) != name) continue;
    out.bytes = int64_t(s["bytes"]);
    out.count = int64_t(s["count"]);
    for (simdjson::dom::element f : simdjson::dom::array(s["callPath"]))
      out.path.emplace_back(std::string_view(f));
  }
  return out;
}

TEST_CASE("heap full: report --heap gives exact figures for a known leak, churn and peak", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  // churn: 1000 temporary 64-byte blocks; peak_phase: 100 x 10000 held at once, then freed; 50 x 1000 leaked.
  auto r = record(out, {test_program("heap_prog"), "leak", "50", "1000"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  simdjson::dom::parser parser;
  std::string text;
  auto heap = heap_report(parser, out, text);
  INFO(text);
  CHECK(std::string_view(heap["mode"]) == "full");
  // The program's own, plus the C and C++ runtimes' few.
  const int64_t allocations = int64_t(heap["allocations"]);
  CHECK(allocations >= 1000 + 100 + 50);
  CHECK(allocations <= 1000 + 100 + 50 + 20);
  CHECK(int64_t(heap["temporary"]) >= 1000);
  CHECK(int64_t(heap["temporary"]) <= 1000 + 20);
  auto leak = site(heap, "topLeakSites", "leak_blocks (heap_prog)");
  CHECK(leak.bytes == 50 * 1000);
  CHECK(leak.count == 50);
  REQUIRE(leak.path.size() >= 2);
  CHECK(leak.path[0] == "leak_blocks");
  CHECK(std::find(leak.path.begin(), leak.path.end(), "main") != leak.path.end());
  auto churn = site(heap, "topCountSites", "churn (heap_prog)");
  CHECK(churn.count == 1000);
  CHECK(churn.bytes == 64000);
  CHECK(site(heap, "topLeakSites", "churn (heap_prog)").bytes == -1);  // none of it leaked
  auto peak = site(heap, "peakSites", "peak_phase (heap_prog)");
  CHECK(peak.bytes == 100 * 10000);
  CHECK(peak.count == 100);
  CHECK(site(heap, "topAllocSites", "peak_phase (heap_prog)").bytes == 100 * 10000);
  // What was held at the peak adds up to the peak, to the byte; what leaked to the leaked bytes.
  int64_t held = 0, leaked = 0;
  for (simdjson::dom::element s : simdjson::dom::array(heap["peakSites"])) held += int64_t(s["bytes"]);
  for (simdjson::dom::element s : simdjson::dom::array(heap["topLeakSites"])) leaked += int64_t(s["bytes"]);
  CHECK(held == int64_t(heap["peakBytes"]));
  CHECK(leaked == int64_t(heap["leakedBytes"]));
  CHECK(int64_t(heap["leakedBytes"]) >= 50000);
  CHECK(double(heap["peakTimeMs"]) > 0);
  // Sizes: the 10000-byte blocks are the (8192, 16384] bin's only ones; the 64-byte ones in (32, 64].
  bool big = false, small = false;
  for (simdjson::dom::element b : simdjson::dom::array(heap["sizes"])) {
    if (uint64_t(b["maxSize"]) == 16384) {
      big = true;
      CHECK(int64_t(b["count"]) == 100);
      CHECK(int64_t(b["bytes"]) == 1000000);
    }
    if (uint64_t(b["maxSize"]) == 64) {
      small = true;
      CHECK(int64_t(b["count"]) >= 1000);
    }
  }
  CHECK(big);
  CHECK(small);
  // The same figures in the terminal after recording and in `report --heap`.
  CHECK(r.err.find(" bytes) at") != std::string::npos);
  CHECK(r.err.find(std::to_string(int64_t(heap["peakBytes"])) + " bytes) at") != std::string::npos);
  CHECK(summary_number(r.err, "heap: ", " allocations") == allocations);
  auto t = run({fxprof_bin(), "report", "--heap", out});
  INFO(t.out);
  REQUIRE(t.status == 0);
  CHECK(t.out.find("Held at the peak:") != std::string::npos);
  CHECK(t.out.find("976.6 KiB in        100 blocks: peak_phase (heap_prog)") != std::string::npos);
  CHECK(t.out.find("48.8 KiB in         50 blocks: leak_blocks (heap_prog)") != std::string::npos);
  CHECK(t.out.find("Sizes:") != std::string::npos);

  // pprof: go tool pprof reads the heap values.
  auto pb = dir.file("p.pb.gz");
  auto e = run({fxprof_bin(), "export", "pprof", out, "-o", pb});
  INFO(e.err);
  REQUIRE(e.status == 0);
  CmdOptions o;
  o.env = {{"HOME", dir.path()}, {"PPROF_TMPDIR", dir.path()}, {"GOCACHE", dir.path() + "/gocache"}};
  auto inuse = run({"go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-unit=B", pb}, o);
  INFO(inuse.out << inuse.err);
  REQUIRE(inuse.status == 0);
  CHECK(inuse.out.find("50000B") != std::string::npos);
  CHECK(inuse.out.find("leak_blocks") != std::string::npos);
  auto objects = run({"go", "tool", "pprof", "-top", "-sample_index=alloc_objects", pb}, o);
  REQUIRE(objects.status == 0);
  INFO(objects.out);
  CHECK(objects.out.find("1000 ") != std::string::npos);  // churn's blocks
}

TEST_CASE("heap: report --heap of a profile without heap data is a clear error", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {"sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"}, {"--cpu-only"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto t = run({fxprof_bin(), "report", "--heap", out});
  CHECK(t.status == 1);
  // The error is the last line (a data-quality line about a debug file sh lacks may come before it).
  const std::string error = "fxprof: " + out + " has no heap data (record it with `fxprof record --heap`)\n";
  CHECK(t.err.ends_with(error));
}

TEST_CASE("heap full: the peak is exact to the byte in the summary and the Memory counter, counts exact",
          "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_prog"), "peak"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  // The program's peak is peak_blocks' 200 x 5000 bytes on top of what the C and C++ runtimes hold when
  // main starts (measured from the markers: the live bytes before the first 5000-byte block).
  HeapTotals t = totals(text, 5000);
  REQUIRE(t.live_before_first >= 0);
  const int64_t peak = t.live_before_first + 200 * 5000;
  CHECK(summary_number(r.err, "(", " bytes) at") == peak);
  CHECK(t.memory_counters == 1);
  CHECK(t.counter_max == peak);
  // Each of the program's allocations and frees is there exactly once.
  REQUIRE(t.by_size.size() == 1);
  auto& sizes = t.by_size.begin()->second;
  CHECK(sizes[5000] == 200);
  CHECK(sizes[-5000] == 200);
  CHECK(sizes[3000] == 100);
  CHECK(sizes[-3000] == 100);
  CHECK(sizes[2222] == 7);
  CHECK(sizes[-2222] == 0);
  // The summary's counts are the profile's, marker for marker.
  CHECK(summary_number(r.err, "heap: ", " allocations") == int64_t(t.allocations));
  CHECK(summary_number(r.err, "temporary, ", " frees") == int64_t(t.frees));
  CHECK(t.retained == t.live_before_first + 7 * 2222);
  CHECK(t.counter_sum == t.retained);
}

TEST_CASE("heap full: a Rust program's bytes go to its Rust functions, its Box::leak is exact", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  constexpr int kVecs = 2000, kLeak = 12345;
  auto program = test_program("heap_rust");
  INFO(program << " is built when CMake finds rustc (`make test-deps` installs it)");
  REQUIRE(access(program.c_str(), X_OK) == 0);
  auto r = record(out, {program, std::to_string(kVecs), std::to_string(kLeak)}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The summary names the Rust function that leaked, not Rust's allocator shims.
  CHECK(r.err.find("12.1 KiB in 1 blocks: heap_rust::leak_once (heap_rust)") != std::string::npos);
  auto text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  HeapTotals t = totals(text);
  auto& sizes = t.by_size.begin()->second;
  CHECK(sizes[1000] == kVecs);
  CHECK(sizes[-1000] == kVecs);
  CHECK(sizes[kLeak] == 1);
  CHECK(sizes[-kLeak] == 0);

  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  CHECK(function_bytes(cli, "native-allocations", "heap_rust::churn::vec_churn") == int64_t(kVecs) * 1000);
  CHECK(function_bytes(cli, "native-retained-allocations", "heap_rust::churn::vec_churn") == 0);
  CHECK(function_bytes(cli, "native-allocations", "heap_rust::churn::string_churn") >= int64_t(kVecs) * 20);
  CHECK(function_bytes(cli, "native-retained-allocations", "heap_rust::churn::string_churn") == 0);
  CHECK(function_bytes(cli, "native-retained-allocations", "heap_rust::leak_once") == kLeak);
  CHECK(function_bytes(cli, "native-allocations", "heap_rust::leak_once") == kLeak);
}

TEST_CASE("heap full: a library's allocations across dlopen and dlclose", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  constexpr int kLoads = 20;
  auto r = record(
      out, {test_program("heap_prog"), "dlopen", test_program("libheap_dl.so"), std::to_string(kLoads)},
      {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("86.8 KiB in 20 blocks: dl_alloc (libheap_dl.so)") != std::string::npos);
  auto text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  HeapTotals t = totals(text);
  REQUIRE(t.by_size.size() == 1);
  auto& sizes = t.by_size.begin()->second;
  CHECK(sizes[4444] == kLoads);
  CHECK(sizes[-4444] == 0);
  CHECK(sizes[96] == 10 * kLoads);
  CHECK(sizes[-96] == 10 * kLoads);
  CHECK(sizes[1234] == 3);

  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  CHECK(bottom_up_bytes(cli, "native-retained-allocations", "dl_alloc") == kLoads * 4444);
  CHECK(bottom_up_bytes(cli, "native-allocations", "dl_alloc") == kLoads * (4444 + 10 * 96));
  CHECK(bottom_up_bytes(cli, "native-retained-allocations", "parent_leak") == 3 * 1234);
}

TEST_CASE("heap full: fork without exec records the child's allocations under its own pid", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  auto r = record(out, {test_program("heap_prog"), "fork"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  HeapTotals t = totals(text);
  // Two processes; the child's blocks (it left with _exit, no exit handlers) are its own, the parent's its.
  REQUIRE(t.by_size.size() == 2);
  int parents = 0, children = 0;
  for (auto& [pid, sizes] : t.by_size) {
    if (sizes.count(4321)) {
      ++children;
      CHECK(sizes[4321] == 5);
      CHECK(sizes[55] == 100);
      CHECK(sizes[-55] == 100);
      CHECK(sizes.count(1234) == 0);
      CHECK(t.retained_by_pid[pid] == 5 * 4321);  // a child frees nothing it inherited as its own
    } else {
      ++parents;
      CHECK(sizes[1234] == 3);
      CHECK(sizes.count(55) == 0);
    }
  }
  CHECK(parents == 1);
  CHECK(children == 1);
  CHECK(t.memory_counters == 2);
  CHECK(r.err.find("21.1 KiB in 5 blocks: child_work (heap_prog)") != std::string::npos);
}

TEST_CASE("heap full: a stream larger than the reader's first 8 MiB loses nothing", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  // 200000 x (allocation + free) = 400000 32-byte records: the reader's mapping grows once.
  constexpr int64_t kChurn = 200000;
  auto r = record(out, {test_program("heap_prog"), "churn", std::to_string(kChurn)}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const int64_t allocations = summary_number(r.err, "heap: ", " allocations");
  CHECK(allocations >= kChurn);
  CHECK(allocations <= kChurn + 20);  // the runtime's own few
  CHECK(summary_number(r.err, "temporary, ", " frees") >= kChurn);
  CHECK(r.err.find("chunks lost") == std::string::npos);
}

// The start times (ms) of the Native allocation markers of `size` bytes.
std::vector<double> marker_times(const std::string& text, int64_t size) {
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  std::vector<double> out;
  auto add = [&](simdjson::dom::element proc) {
    for (simdjson::dom::element th : simdjson::dom::array(proc["threads"]))
      for (simdjson::dom::element m : simdjson::dom::array(th["markers"]["data"])) {
        simdjson::dom::element data = simdjson::dom::array(m).at(5);
        if (data.is_object() && std::string_view(data["type"]) == "Native allocation" &&
            int64_t(data["size"]) == size)
          out.push_back(double(simdjson::dom::array(m).at(1)));
      }
  };
  add(doc);
  for (simdjson::dom::element p : simdjson::dom::array(doc["processes"])) add(p);
  return out;
}

TEST_CASE("heap full: allocations are placed on the recording's clock, with TSC times and without",
          "[heap]") {
  for (bool tsc : {true, false}) {
    INFO((tsc ? "TSC times" : "CLOCK_MONOTONIC times"));
    TempDir dir;
    auto out = dir.file("p.json.gz");
    CmdOptions o;
    if (!tsc) o.env = {{"FXPROF_HEAP_NO_TSC", "1"}};
    auto r = record(out, {test_program("heap_prog"), "gap", "300"}, {"--heap=full"}, o);
    INFO(r.err);
    REQUIRE(r.status == 0);
    auto text = read_profile_text(out);
    auto first = marker_times(text, 7777), second = marker_times(text, 8888);
    REQUIRE(first.size() == 1);
    REQUIRE(second.size() == 1);
    // The program sleeps 300 ms between the two and says how long that took on CLOCK_MONOTONIC (a loaded
    // machine oversleeps): a TSC mapped at a wrong rate would stretch or shrink it.
    const size_t said = r.out.find("gap_ms ");
    REQUIRE(said != std::string::npos);
    const double gap = std::stod(r.out.substr(said + 7));
    CHECK(gap >= 300);
    CHECK(second[0] - first[0] == Approx(gap).margin(3 + 0.02 * gap));
    // Both within the recording (its times start at 0).
    simdjson::dom::parser parser;
    auto doc = parse_json(parser, text);
    CHECK(first[0] >= 0);
    CHECK(second[0] <= double(doc["meta"]["profilingEndTime"]) + 1);
  }
}

TEST_CASE("heap sampled: the estimates are unbiased (within 10%)", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  // 40 MB leaked in 4 KiB blocks at one sample per 64 KiB: ~640 samples. Seeded: the 95% interval is 8% of
  // the total here, so an unseeded run falls outside 10% about once in 60 (a fresh-clone run saw +11.7%);
  // tests/heap/sampling_test.cpp measures the bias over many seeds.
  constexpr int kBlocks = 10000, kBlock = 4096;
  CmdOptions seeded;
  seeded.env = {{"FXPROF_HEAP_SEED", "1"}};
  auto r = record(out, {test_program("heap_prog"), "leak", std::to_string(kBlocks), std::to_string(kBlock)},
                  {"--heap", "--heap-rate", "65536"}, seeded);
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));
  const double expected = double(kBlocks) * kBlock;
  CHECK(double(t.retained) > expected * 0.9);
  CHECK(double(t.retained) < expected * 1.1 + 100000);
  CHECK(t.allocations < 2000);  // sampled, not every block
  CHECK(r.err.find("leak_blocks (heap_prog)") != std::string::npos);
  // The error bars: the 95% interval, 1.96 sqrt((T + rate) * rate) (3.2 MB here), said in the summary and the
  // report.
  CHECK(r.err.find("heap (estimated from samples, +- their 95% interval): peak ") != std::string::npos);
  simdjson::dom::parser parser;
  std::string json;
  auto heap = heap_report(parser, out, json);
  INFO(json);
  const double leaked = double(int64_t(heap["leakedBytes"])), err = double(int64_t(heap["leakedBytesError"]));
  CHECK(std::abs(err - 1.96 * std::sqrt((leaked + 65536) * 65536)) <= 1);
  CHECK(std::abs(leaked - expected) < 2 * err + 100000);
}

TEST_CASE("heap sampled: sampled blocks freed on other threads balance", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  // 8 x 1000 blocks of 256 bytes, each freed by the next thread: at one sample per 1 KiB, ~2000 of them
  // sampled, each standing for 256 / (1 - exp(-256/1024)) = 1157 bytes.
  auto r = record(out, {test_program("heap_prog"), "threads"}, {"--heap", "--heap-rate", "1024"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));  // requires each free to meet its allocation
  REQUIRE(t.by_size.size() == 1);
  auto& sizes = t.by_size.begin()->second;
  CHECK(sizes[1157] > 1000);
  CHECK(sizes[1157] < 4000);
  CHECK(sizes[-1157] == sizes[1157]);
}

TEST_CASE("heap sampled: a thread's first allocation is sampled by its size, not always", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  // 200 threads allocate 64 bytes each: 12.8 KB in all, 2.5% of the default rate; a countdown that started
  // at 0 would sample every one.
  auto r = record(out, {test_program("heap_prog"), "first", "200"}, {"--heap"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));
  uint64_t sampled_64 = 0;
  for (auto& [pid, sizes] : t.by_size)
    for (auto& [size, count] : sizes)
      if (size > 0 && size / 10000 == 52) sampled_64 += count;  // a 64-byte block weighs 524320
  CHECK(sampled_64 < 20);
}

TEST_CASE("heap sampled: malloc in a signal handler does not hang", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  CmdOptions o;
  o.timeout = std::chrono::seconds(60);
  // One sample per 64 bytes: the handler often interrupts a sample being recorded.
  auto r = record(out, {test_program("heap_prog"), "signal"}, {"--heap", "--heap-rate", "64"}, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));
  CHECK(t.allocations > 500);
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
  CmdOptions o;
  o.env = {{"FXPROF_HEAP_DEBUG", "1"}};
  auto r = record(out, {test_program("heap_prog"), "threads"}, {"--heap=full"}, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  HeapTotals t = totals(read_profile_text(out));
  CHECK(t.allocations >= 8 * (1000 + 10));
  CHECK(r.err.find("78.1 KiB in 80 blocks: thread_leak (heap_prog)") != std::string::npos);
  // Each thread is known to the worker before its first event (the shim's first chunk): folded in order
  // as they came, never again after the exit (a thread's first chunk, sent when full, used to come after
  // other threads' later events had been folded).
  CHECK(r.err.find("fxprof: heap debug: ") != std::string::npos);
  CHECK(r.err.find("(refolded)") == std::string::npos);
}

TEST_CASE("heap full: malloc in a signal handler does not hang", "[heap]") {
  TempDir dir;
  auto out = dir.file("p.json.gz");
  CmdOptions o;
  o.timeout = std::chrono::seconds(60);
  auto r = record(out, {test_program("heap_prog"), "signal"}, {"--heap=full"}, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The program only ends once its handler has run 150 times while the main loop allocates.
  CHECK(r.err.find("frees") != std::string::npos);
}

TEST_CASE("heap: a program with its own allocator is recorded with uprobes as root, exactly", "[heap]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root
  TempDir dir;
  auto out = dir.file("p.json.gz");
  const std::string program = test_program("heap_ownalloc");
  // 2000 je_malloc(100) calls, every other block je_free'd: none of them through the C library's malloc.
  auto r = record(out, {program, "2000"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("fxprof: heap: " + program +
                   " has its own allocator: recorded with uprobes on je_aligned_alloc, je_calloc, je_malloc, "
                   "je_posix_memalign, je_realloc, je_free (3000 calls, each a trap into the kernel)\n") !=
        std::string::npos);
  CHECK(r.err.find("does not see them") == std::string::npos);
  simdjson::dom::parser parser;
  std::string json;
  auto heap = heap_report(parser, out, json);
  INFO(json);
  // The same heap events as the shim's: exact counts, bytes, leaks and the allocating function.
  JsonSite alloc = site(heap, "topAllocSites", "main (heap_ownalloc)");
  CHECK(alloc.count == 2000);
  CHECK(alloc.bytes == 200000);
  JsonSite leak = site(heap, "topLeakSites", "main (heap_ownalloc)");
  CHECK(leak.count == 1000);
  CHECK(leak.bytes == 100000);
  CHECK(int64_t(heap["frees"]) >= 1000);
  CHECK(int64_t(heap["peakBytes"]) >= 100000);
  // A program that uses malloc gets no such line.
  auto plain = record(out, {test_program("heap_prog"), "churn", "10"}, {"--heap=full"});
  CHECK(plain.err.find("own allocator") == std::string::npos);
}

TEST_CASE("heap: an ordinary user is told the allocator it cannot see and that uprobes need root", "[heap]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root and drops to the test user here
  TempDir dir;
  CmdOptions opts = as_test_user(dir);
  const std::string program = test_program("heap_ownalloc");
  auto r = run({fxprof_bin(), "record", "--heap", "--save-only", "-o", "p.json.gz", "--", program, "5000000"},
               opts);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("fxprof: heap: " + program +
                   " has its own allocator (je_aligned_alloc, je_calloc, je_malloc, je_posix_memalign, "
                   "je_realloc): the allocations made through it do not go through "
                   "the C library's malloc, so --heap does not see them (recording them with uprobes failed: "
                   "cannot load the BPF program (Operation not permitted): uprobes need root)\n") !=
        std::string::npos);
  // And in the profile's data-quality entries.
  CHECK(read_profile_text(dir.path() + "/p.json.gz").find("Allocator --heap cannot see: " + program) !=
        std::string::npos);
}

TEST_CASE("heap: clear errors for -p and bad modes", "[heap]") {
  auto r = run({fxprof_bin(), "record", "--heap", "-p", "1"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--heap records programs fxprof starts") != std::string::npos);
  r = run({fxprof_bin(), "record", "--heap=all", "--", "true"});
  CHECK(r.status == 2);
  CHECK(r.err.find("--heap must be sampled or full") != std::string::npos);
}

TEST_CASE("heap: --symbol-dir names the heap summary's sites in a stripped binary", "[heap]") {
  TempDir dir;
  const std::string program = test_program("heap_prog_stripped");
  const std::string syms = test_program("heap_syms");  // heap_prog_stripped.debug, and nothing points at it
  // Without the folder the stripped binary's sites are addresses; with it, its functions.
  auto bare = record(dir.file("bare.json.gz"), {program, "leak", "50", "1000"}, {"--heap=full"});
  INFO(bare.err);
  REQUIRE(bare.status == 0);
  CHECK(bare.err.find("blocks: heap_prog_stripped+0x") != std::string::npos);
  CHECK(bare.err.find("leak_blocks") == std::string::npos);
  auto named = record(dir.file("named.json.gz"), {program, "leak", "50", "1000"},
                      {"--heap=full", "--symbol-dir", syms});
  INFO(named.err);
  REQUIRE(named.status == 0);
  CHECK(named.err.find("blocks: leak_blocks (heap_prog_stripped)") != std::string::npos);
  CHECK(named.err.find("heap_prog_stripped+0x") == std::string::npos);
}

}  // namespace
}  // namespace fxprof::test
