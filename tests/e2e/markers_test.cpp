// Issue 33: what a program says it is doing (include/fxprof/markers.h, markers.rs) reaches every view: the
// profile's markers on the thread that wrote them, with their times to the tenth of a millisecond, `fxprof
// report --markers`, `--marker NAME`, the pprof labels and the Firefox Profiler's marker table
// (profiler-cli).
#include "model/markers.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "base/fd.h"
#include "gecko/gecko_reader.h"
#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

struct Truth {
  long tid = 0;
  uint64_t start = 0, end = 0;
};

std::vector<Truth> read_truth(const std::string& path) {
  auto text = fxprof::read_file(path);
  REQUIRE(text);
  std::vector<Truth> out;
  std::istringstream in(*text);
  for (Truth t; in >> t.tid >> t.start >> t.end;) out.push_back(t);
  return out;
}

double nearest_rank(std::vector<double> sorted, double q) {
  std::sort(sorted.begin(), sorted.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

// The program markers named `name` of thread `tid`.
std::vector<const fxprof::model::Marker*> markers_named(const fxprof::model::Profile& p, uint32_t tid,
                                                        std::string_view name) {
  std::vector<const fxprof::model::Marker*> out;
  for (const auto& proc : p.processes)
    for (const auto& t : proc.threads)
      if (t.tid == tid)
        for (const auto& m : t.markers)
          if (m.program && p.strings.get(m.name) == name) out.push_back(&m);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  return out;
}

}  // namespace

TEST_CASE("markers: a program's requests arrive with their times, fields and thread", "[e2e][markers]") {
  TempDir dir;
  const std::string out = dir.file("m.json.gz"), truth_file = dir.file("truth.txt");
  auto r = record(out, {test_program("markers_requests"), truth_file});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::vector<Truth> truth = read_truth(truth_file);
  REQUIRE(truth.size() == 100);

  // The saved profile, read back: 100 "request" markers on the worker thread, each within 0.1 ms of the
  // program's own clock reads (the file keeps milliseconds as doubles).
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  const auto tid = static_cast<uint32_t>(truth[0].tid);
  auto requests = markers_named(*profile, tid, "request");
  REQUIRE(requests.size() == 100);
  std::vector<double> durations;
  for (size_t i = 0; i < 100; ++i) {
    const auto& m = *requests[i];
    CHECK(std::abs(static_cast<double>(m.start_ns) - static_cast<double>(truth[i].start)) < 1e5);
    CHECK(std::abs(static_cast<double>(m.end_ns - m.start_ns) -
                   static_cast<double>(truth[i].end - truth[i].start)) < 1e5);
    durations.push_back(static_cast<double>(truth[i].end - truth[i].start) / 1e6);
  }
  // Its fields and category, typed; the nested scopes and the instants too.
  bool id = false, path = false, category = false;
  for (const auto& f : requests[7]->fields) {
    const std::string_view key = profile->strings.get(f.key);
    if (key == "id") id = !f.is_string && f.number == 7;
    if (key == "path") path = f.is_string && profile->strings.get(f.string) == "/item";
    if (key == "category") category = f.is_string && profile->strings.get(f.string) == "http";
  }
  CHECK(id);
  CHECK(path);
  CHECK(category);
  CHECK(markers_named(*profile, tid, "compute").size() == 100);
  auto db = markers_named(*profile, tid, "db");
  REQUIRE(db.size() == 100);
  CHECK(db[0]->phase == fxprof::model::MarkerPhase::Instant);
  CHECK(markers_named(*profile, static_cast<uint32_t>(profile->processes[0].pid), "request").empty());

  // report --markers: the percentiles of the printed truth.
  auto rep = run({fxprof_bin(), "report", "--markers", "--json", out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out);
  bool found = false;
  for (simdjson::dom::element m : simdjson::dom::array(doc["markers"])) {
    if (std::string_view(m["name"]) != "request") continue;
    found = true;
    CHECK(uint64_t(m["count"]) == 100);
    CHECK(double(m["p50_ms"]) == Approx(nearest_rank(durations, 0.5)).margin(0.1));
    CHECK(double(m["p90_ms"]) == Approx(nearest_rank(durations, 0.9)).margin(0.1));
    CHECK(double(m["p99_ms"]) == Approx(nearest_rank(durations, 0.99)).margin(0.1));
    CHECK(double(m["max_ms"]) == Approx(nearest_rank(durations, 1.0)).margin(0.1));
    // Inside the requests: the compute on-CPU, the wait off-CPU; never the work between them.
    std::string on, off;
    for (simdjson::dom::element f : simdjson::dom::array(m["on_cpu"]))
      on += std::string(std::string_view(f["name"])) + ";";
    for (simdjson::dom::element f : simdjson::dom::array(m["off_cpu"]))
      off += std::string(std::string_view(f["name"])) + ";";
    INFO(on << " | " << off);
    CHECK(on.find("spin_until") !=
          std::string::npos);  // inlined into request_compute: its innermost function
    CHECK(on.find("between_requests") == std::string::npos);
    CHECK(off.find("nanosleep") != std::string::npos);  // request_wait's wait, charged to libc's function
  }
  CHECK(found);

  // --marker request: report and folded export hold the request's functions only.
  auto inside = run({fxprof_bin(), "report", "--marker", "request", "--threads", "--limit", "50", out});
  INFO(inside.out << inside.err);
  REQUIRE(inside.status == 0);
  CHECK(inside.out.find("request_compute") != std::string::npos);
  CHECK(inside.out.find("between_requests") == std::string::npos);
  auto all = run({fxprof_bin(), "report", "--threads", "--limit", "50", out});
  CHECK(all.out.find("between_requests") != std::string::npos);
  const std::string folded = dir.file("in.folded");
  auto ex = run({fxprof_bin(), "export", "folded", "--marker", "request", out, "-o", folded});
  INFO(ex.err);
  REQUIRE(ex.status == 0);
  auto ftext = fxprof::read_file(folded);
  REQUIRE(ftext);
  CHECK(ftext->find("request_compute") != std::string::npos);
  CHECK(ftext->find("between_requests") == std::string::npos);
  // pprof: samples labelled with the marker they fell in (the label key and value are in its strings).
  const std::string pb = dir.file("p.pb");
  auto pp = run({fxprof_bin(), "export", "pprof", out, "-o", pb});
  INFO(pp.err);
  REQUIRE(pp.status == 0);
  auto pbtext = fxprof::read_file(pb);
  REQUIRE(pbtext);
  // string_table entries (field 6, length-delimited): "marker" and the innermost marker's name, whole.
  CHECK(pbtext->find(std::string("\x32\x06"
                                 "marker")) != std::string::npos);
  CHECK(pbtext->find(std::string("\x32\x07"
                                 "compute")) != std::string::npos);
  auto missing = run({fxprof_bin(), "report", "--marker", "no-such-marker", out});
  CHECK(missing.status != 0);
  CHECK(missing.err.find("no-such-marker") != std::string::npos);

  // The Firefox Profiler's own code: the worker's markers in its marker table, their fields in the sidebar
  // (the schema of "request": Category, Id, Path).
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list =
      cli.cmd({"thread", "markers", "--thread", "t-1", "--search", "request", "--list", "--limit", "1"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  CHECK(list.out.find("100 markers") != std::string::npos);
  CHECK(list.out.find("request id=0 path=/item") != std::string::npos);
  const size_t handle = list.out.find("m-");
  REQUIRE(handle != std::string::npos);
  auto info = cli.cmd({"marker", "info", list.out.substr(handle, list.out.find(' ', handle) - handle)});
  INFO(info.out << info.err);
  REQUIRE(info.status == 0);
  CHECK(info.out.find("Category: http") != std::string::npos);
  CHECK(info.out.find("Id: 0") != std::string::npos);
  CHECK(info.out.find("Path: /item") != std::string::npos);
}

TEST_CASE("markers: the Rust file's markers", "[e2e][markers]") {
  TempDir dir;
  const std::string out = dir.file("r.json.gz");
  auto r = record(out, {test_program("markers_rust")});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  const auto pid = profile->processes.at(0).pid;
  auto requests = markers_named(*profile, pid, "rust_request");
  CHECK(requests.size() == 20);
  for (const auto* m : requests) CHECK(m->end_ns - m->start_ns >= 2000000);
  CHECK(markers_named(*profile, pid, "tick").size() == 20);
}
