// Issue 33 item 3: `record --usdt`: USDT probes as markers, on the thread that hit them at the samples'
// clock, with their arguments (strings read from the process): our own probes (tests/programs/markers/
// usdt_requests.cpp), libstdc++'s (libstdcxx:throw/catch) and Debian's python3 (function__entry/return).
// Debian 12's glibc has no probes (it is built without systemtap): libstdc++ is the library nobody here
// wrote.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/fd.h"
#include "gecko/gecko_reader.h"
#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

using fxprof::model::Marker;
using fxprof::model::Profile;

// The program markers named `name` of thread `tid` (any thread when 0), by start.
std::vector<const Marker*> markers_named(const Profile& p, uint32_t tid, std::string_view name) {
  std::vector<const Marker*> out;
  for (const auto& proc : p.processes)
    for (const auto& t : proc.threads)
      if (tid == 0 || t.tid == tid)
        for (const auto& m : t.markers)
          if (m.program && p.strings.get(m.name) == name) out.push_back(&m);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  return out;
}

const fxprof::model::MarkerField* field(const Profile& p, const Marker& m, std::string_view key) {
  for (const auto& f : m.fields)
    if (p.strings.get(f.key) == key) return &f;
  return nullptr;
}

std::string string_field(const Profile& p, const Marker& m, std::string_view key) {
  const auto* f = field(p, m, key);
  return f && f->is_string ? std::string(p.strings.get(f->string)) : "<none>";
}

double number_field(const Profile& p, const Marker& m, std::string_view key) {
  const auto* f = field(p, m, key);
  return f && !f->is_string ? f->number : -1;
}

}  // namespace

TEST_CASE("usdt: our probes' arguments arrive intact, start/done pairs are the requests' intervals",
          "[e2e][usdt]") {
  TempDir dir;
  const std::string out = dir.file("u.json.gz"), truth_file = dir.file("truth.txt");
  auto r = record(out, {test_program("usdt_requests"), "60", truth_file},
                  {"--usdt", "fxtest:request__start=id:%d,kind:%s", "--usdt",
                   "fxtest:request__done=-,status:%d", "--usdt", "fxtest:tick", "--usdt-pair"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("fxprof: usdt: 180 hits of") != std::string::npos);
  struct Truth {
    long tid = 0;
    uint64_t s0 = 0, s1 = 0, e0 = 0, e1 = 0;  // the clock read before and after each probe
    int status = 0;
  };
  auto text = fxprof::read_file(truth_file);
  REQUIRE(text);
  std::vector<Truth> truth;
  std::istringstream in(*text);
  for (Truth t; in >> t.tid >> t.s0 >> t.s1 >> t.e0 >> t.e1 >> t.status;) truth.push_back(t);
  REQUIRE(truth.size() == 60);

  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  const auto tid = static_cast<uint32_t>(truth[0].tid);
  auto requests = markers_named(*profile, tid, "fxtest:request");
  REQUIRE(requests.size() == 60);
  static const char* const kKinds[] = {"index", "search", "upload"};
  for (size_t i = 0; i < 60; ++i) {
    const Marker& m = *requests[i];
    INFO("request " << i);
    CHECK(m.phase == fxprof::model::MarkerPhase::Interval);
    // Each probe's time lies between the clock reads around it; the duration is the program's to 0.1 ms (or
    // to the brackets' width, when a preemption next to a probe widened one).
    const Truth& t = truth[i];
    CHECK((m.start_ns >= t.s0 && m.start_ns <= t.s1));
    CHECK((m.end_ns >= t.e0 && m.end_ns <= t.e1));
    const double printed = (static_cast<double>(t.e0 + t.e1) - static_cast<double>(t.s0 + t.s1)) / 2;
    const double slack = std::max(1e5, static_cast<double>((t.s1 - t.s0) + (t.e1 - t.e0)));
    CHECK(std::abs(static_cast<double>(m.end_ns - m.start_ns) - printed) <= slack);
    CHECK(number_field(*profile, m, "id") == static_cast<double>(i));
    CHECK(string_field(*profile, m, "kind") == kKinds[i % 3]);
    CHECK(number_field(*profile, m, "status") == truth[i].status);
    CHECK(string_field(*profile, m, "category") == "fxtest");
  }
  // fxtest:tick fires only while its semaphore is raised: attaching raised it.
  auto ticks = markers_named(*profile, tid, "fxtest:tick");
  REQUIRE(ticks.size() == 60);
  CHECK(ticks[0]->phase == fxprof::model::MarkerPhase::Instant);
  for (size_t i = 0; i < 60; ++i) CHECK(number_field(*profile, *ticks[i], "arg1") == static_cast<double>(i));

  // report --markers counts them as the program's markers.
  auto rep = run({fxprof_bin(), "report", "--markers", "--json", out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out);
  bool found = false;
  for (simdjson::dom::element m : simdjson::dom::array(doc["markers"]))
    if (std::string_view(m["name"]) == "fxtest:request") found = uint64_t(m["count"]) == 60;
  CHECK(found);

  // The Firefox Profiler's own code: the markers and their fields.
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list = cli.cmd({"thread", "markers", "--search", "fxtest:request", "--list", "--limit", "1"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  CHECK(list.out.find("60 markers") != std::string::npos);
  CHECK(list.out.find("fxtest:request id=0 kind=index") != std::string::npos);
}

TEST_CASE("usdt: libstdc++'s throw and catch probes, one marker a call", "[e2e][usdt]") {
  TempDir dir;
  const std::string out = dir.file("t.json.gz");
  auto r = record(out, {test_program("usdt_throw"), "1000"},
                  {"--usdt", "libstdcxx:throw=object:%x,tinfo:%x", "--usdt", "libstdcxx:catch"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  const auto pid = static_cast<uint32_t>(profile->processes.at(0).pid);
  auto throws = markers_named(*profile, pid, "libstdcxx:throw");
  CHECK(throws.size() == 1000);
  CHECK(markers_named(*profile, pid, "libstdcxx:catch").size() == 1000);
  REQUIRE(!throws.empty());
  CHECK(string_field(*profile, *throws[0], "tinfo").starts_with("0x"));
}

// Python 3.11's function__entry never fires (CPython issue 98894, fixed for 3.15): its returns are instants,
// its imports (import__find__load__start/done) and collections (gc__start/done) pairs.
TEST_CASE("usdt: python3's probes: each function's returns, imports and collections as intervals",
          "[e2e][usdt]") {
  TempDir dir;
  const std::string out = dir.file("py.json.gz"), truth_file = dir.file("truth.txt");
  const std::string script = source_dir() + "/tests/programs/markers/usdt_calls.py";
  auto r = record(out, {"/usr/bin/python3", script, "5", truth_file},
                  {"--usdt", "python:function__return=file:%s,name:%s,line:%d", "--usdt",
                   "python:import__find__load__start=name:%s", "--usdt", "python:gc__start=generation:%d",
                   "--usdt-pair"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto text = fxprof::read_file(truth_file);
  REQUIRE(text);
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> truth;
  std::istringstream in(*text);
  std::string what;
  for (uint64_t s = 0, e = 0; in >> what >> s >> e;) truth[what].emplace_back(s, e);
  REQUIRE(truth["burn_a"].size() == 5);
  auto profile = fxprof::gecko::read_gecko_profile(out);
  REQUIRE(profile);
  // Each call's return, named by the function, in the call's time, with its file and the return's line.
  for (const std::string f : {"burn_a", "burn_b"}) {
    auto returns = markers_named(*profile, 0, f);
    INFO(f);
    REQUIRE(returns.size() == 5);
    for (size_t i = 0; i < 5; ++i) {
      const Marker& m = *returns[i];
      CHECK(m.phase == fxprof::model::MarkerPhase::Instant);
      CHECK(m.start_ns >= truth[f][i].first);
      CHECK(m.start_ns <= truth[f][i].second);
      CHECK(string_field(*profile, m, "file") == script);
      CHECK(number_field(*profile, m, "line") == (f == "burn_a" ? 14 : 21));
    }
  }
  // The imports: an interval named by the module, within the clock reads around the import (python's own
  // work between them and the probes is not the scheduler's to bound); json's own modules nest in it.
  for (const std::string module : {"json", "fractions", "csv"}) {
    INFO(module);
    auto imports = markers_named(*profile, 0, module);
    REQUIRE(imports.size() == 1);
    const Marker& m = *imports[0];
    REQUIRE(m.phase == fxprof::model::MarkerPhase::Interval);
    CHECK(m.start_ns >= truth[module][0].first);
    CHECK(m.end_ns <= truth[module][0].second);
  }
  auto decoder = markers_named(*profile, 0, "json.decoder");
  REQUIRE(decoder.size() == 1);
  CHECK(decoder[0]->start_ns > markers_named(*profile, 0, "json")[0]->start_ns);
  CHECK(decoder[0]->end_ns < markers_named(*profile, 0, "json")[0]->end_ns);
  // The three collections gc.collect() made (the collector is off otherwise), generation 2 each.
  size_t in_windows = 0;
  for (const Marker* m : markers_named(*profile, 0, "python:gc"))
    for (const auto& [start, end] : truth["gc"])
      if (m->start_ns >= start && m->end_ns <= end) {
        ++in_windows;
        CHECK(number_field(*profile, *m, "generation") == 2);
      }
  CHECK(in_windows == 3);
}

TEST_CASE("usdt: a probe the program does not have, and a bad FORMAT, are refused before it runs",
          "[e2e][usdt]") {
  TempDir dir;
  const std::string marker = dir.file("ran");
  auto r = run({fxprof_bin(), "record", "--save-only", "-o", dir.file("x.json"), "--usdt", "fxtest:nope",
                "--", test_program("usdt_requests"), "1", marker});
  CHECK(r.status == 1);
  CHECK(r.err == "fxprof: no USDT probe fxtest:nope in " + test_program("usdt_requests") +
                     " or the libraries it loads; they have fxtest:request__done fxtest:request__start "
                     "fxtest:tick\n");
  CHECK(!fxprof::read_file(marker));  // never ran
  // A library's probes are listed too (libstdc++'s for a program that throws).
  auto lib = run({fxprof_bin(), "record", "--save-only", "-o", dir.file("x.json"), "--usdt", "libstdcxx:nope",
                  "--", test_program("usdt_throw")});
  CHECK(lib.status == 1);
  CHECK(lib.err.find(" libstdcxx:catch libstdcxx:rethrow libstdcxx:throw") != std::string::npos);
  auto bad = run({fxprof_bin(), "record", "--usdt", "fxtest:tick=%q", "--", test_program("usdt_requests")});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("'%q' is not %d, %u, %x, %s or -") != std::string::npos);
}

TEST_CASE("usdt: an ordinary user is told in one line that probes need root", "[e2e][usdt][unprivileged]") {
  REQUIRE(geteuid() == 0);  // the suite runs as root and drops to the test user here
  TempDir dir;
  CmdOptions opts = as_test_user(dir);
  const std::string marker = dir.file("ran");
  auto r = run({fxprof_bin(), "record", "--save-only", "-o", dir.file("u.json"), "--usdt", "fxtest:tick",
                "--", test_program("usdt_requests"), "1", marker},
               opts);
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.starts_with("fxprof: --usdt: USDT probes need root (CAP_BPF and CAP_PERFMON)"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(!fxprof::read_file(marker));  // refused before the program ran
}
