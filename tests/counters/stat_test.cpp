// `fxprof stat` and `fxprof record -e` end to end: counts against perf stat on the same programs, the no-PMU
// notice, per-process counts, Cachegrind's simulated misses, event samples in the function that caused them,
// and the counter tracks every recording gets, as the Firefox Profiler's own code lists them.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "base/fd.h"
#include "counters/events.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

// `perf stat -x, -e EVENTS -- argv`: event name -> count.
std::map<std::string, double> perf_stat(const std::string& events, const std::vector<std::string>& argv) {
  TempDir dir;
  std::vector<std::string> cmd{"perf", "stat", "-x,", "-o", dir.file("perf.txt"), "-e", events, "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  auto r = run(cmd);
  INFO(r.err);
  REQUIRE(r.status >= 0);
  std::ifstream in(dir.file("perf.txt"));
  std::map<std::string, double> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    if (f.size() >= 3 && !f[0].empty() && f[0][0] != '<') out[f[2]] = std::stod(f[0]);
  }
  return out;
}

struct Stat {
  CmdResult r;
  std::string json;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  // The total of `event`; -1 when it is null (unavailable).
  double count(const std::string& event) {
    for (simdjson::dom::element e : simdjson::dom::array(doc["events"]))
      if (std::string_view(e["name"]) == event)
        return e["value"].is_null() ? -1 : double(uint64_t(e["value"]));
    FAIL("no event " << event);
    return -2;
  }
};

void stat_json(Stat& s, const std::vector<std::string>& opts, const std::vector<std::string>& argv) {
  TempDir dir;
  std::vector<std::string> cmd{fxprof_bin(), "stat", "--json", "-o", dir.file("stat.json")};
  cmd.insert(cmd.end(), opts.begin(), opts.end());
  cmd.push_back("--");
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  s.r = run(cmd);
  auto text = fxprof::read_file(dir.file("stat.json"));
  INFO(s.r.err);
  REQUIRE(text);
  s.json = *text;
  s.doc = parse_json(s.parser, s.json);
}

}  // namespace

TEST_CASE("stat: a program touching N fresh pages has N page faults, as perf stat counts them") {
  const std::vector<std::string> prog{test_program("counters_touch"), "20000", "0", "0", "3"};
  Stat s;
  stat_json(s, {}, prog);
  INFO(s.r.err << s.json);
  CHECK(s.r.status == 3);  // the program's exit status
  const double faults = s.count("page-faults");
  CHECK(faults >= 20000);
  CHECK(faults <= 20000 * 1.05 + 300);  // the loader's and libc's own few hundred
  CHECK(s.count("minor-faults") + s.count("major-faults") == Approx(faults).epsilon(0.02));
  CHECK(s.count("task-clock") > 0);
  auto perf = perf_stat("page-faults", prog);
  REQUIRE(perf.count("page-faults"));
  CHECK(faults == Approx(perf["page-faults"]).epsilon(0.03));
}

TEST_CASE("stat: a program that sleeps has context switches, as perf stat counts them") {
  const std::vector<std::string> prog{test_program("counters_touch"), "10", "40"};
  Stat s;
  stat_json(s, {"-e", "context-switches,task-clock"}, prog);
  INFO(s.r.err << s.json);
  REQUIRE(s.r.status == 0);
  const double cs = s.count("context-switches");
  CHECK(cs >= 41);  // 40 sleeps and the final one
  CHECK(cs <= 41 * 1.25 + 10);
  auto perf = perf_stat("context-switches", prog);
  REQUIRE(perf.count("context-switches"));
  CHECK(cs == Approx(perf["context-switches"]).epsilon(0.25));
}

TEST_CASE("stat: counts per process add up to the total") {
  Stat s;
  stat_json(s, {"-e", "page-faults"}, {test_program("counters_touch"), "1000", "0", "8000"});
  INFO(s.r.err << s.json);
  REQUIRE(s.r.status == 0);
  simdjson::dom::array procs = s.doc["processes"];
  REQUIRE(procs.size() == 2);
  const double parent = double(uint64_t(procs.at(0)["counts"]["page-faults"]));
  const double child = double(uint64_t(procs.at(1)["counts"]["page-faults"]));
  CHECK(std::string_view(procs.at(0)["name"]) == "counters_touch");
  CHECK(std::string_view(procs.at(1)["name"]) == "counters_touch");
  CHECK(child >= 8000);
  CHECK(child <= 8000 * 1.05 + 100);  // a fork copies on write a few pages more
  CHECK(parent >= 1000);
  CHECK(parent < 8000);
  CHECK(parent + child == s.count("page-faults"));
}

TEST_CASE("stat: perf's layout, derived figures, what they suggest; no PMU said once, never as zero") {
  auto r = run({fxprof_bin(), "stat", "--", test_program("counters_touch"), "5000"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find(" Performance counter stats for '" + test_program("counters_touch") + " 5000':") !=
        std::string::npos);
  CHECK(r.err.find(" msec task-clock") != std::string::npos);
  CHECK(r.err.find("CPUs utilized") != std::string::npos);
  CHECK(r.err.find(" page-faults ") != std::string::npos);
  CHECK(r.err.find("seconds time elapsed") != std::string::npos);
  CHECK(r.err.find(" What they suggest:\n  - ") != std::string::npos);
  const bool pmu = fxprof::counters::have_pmu();
  auto notices = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find("no hardware counters"); at != std::string::npos;
         at = text.find("no hardware counters", at + 1))
      ++n;
    return n;
  };
  if (!pmu) {
    CHECK(notices(r.err) == 1);
    CHECK(r.err.find(" cycles\n") == std::string::npos);  // not listed as 0
    CHECK(r.err.find("insn per cycle") == std::string::npos);
    Stat s;
    stat_json(s, {"-e", "cycles,page-faults"}, {test_program("counters_touch"), "100"});
    INFO(s.r.err << s.json);
    CHECK(notices(s.r.err) == 1);
    CHECK(s.count("cycles") == -1);  // null, not 0
    CHECK(s.count("page-faults") >= 100);
    auto t = run({fxprof_bin(), "stat", "-e", "cycles", "--", test_program("counters_touch"), "100"});
    const size_t at = t.err.find(" cycles\n");
    REQUIRE(at != std::string::npos);
    const std::string line = t.err.substr(t.err.rfind('\n', at) + 1, at - t.err.rfind('\n', at));
    CHECK(line.find("<not supported>") != std::string::npos);
  } else {
    CHECK(notices(r.err) == 0);
    CHECK(r.err.find("insn per cycle") != std::string::npos);
  }
}

TEST_CASE("stat: bad input is one line and a non-zero exit") {
  auto bad = run({fxprof_bin(), "stat", "-e", "bogus", "--", "true"});
  CHECK(bad.status == 2);
  CHECK(bad.err.rfind("fxprof stat: unknown event 'bogus' (known: ", 0) == 0);
  auto none = run({fxprof_bin(), "stat"});
  CHECK(none.status == 2);
  CHECK(none.err == "fxprof stat: nothing to count: give a command or -p PID (try `fxprof stat --help`)\n");
  auto missing = run({fxprof_bin(), "stat", "--", "/nonexistent/prog"});
  CHECK(missing.status == 127);
  CHECK(missing.err == "fxprof: cannot run '/nonexistent/prog': No such file or directory\n");
  auto dur = run({fxprof_bin(), "stat", "-d", "1", "--", "true"});
  CHECK(dur.status == 2);
}

TEST_CASE("stat -p: counts a running process until it exits") {
  // 200 sleeps of 2 ms, each a context switch, started only once fxprof says it is counting (a FIFO the
  // program reads after "touched"): the count follows from the handshake, not from how soon the attach came.
  TempDir dir;
  const std::string go = dir.file("go");
  REQUIRE(mkfifo(go.c_str(), 0600) == 0);
  CmdOptions opts;
  opts.env["COUNTERS_TOUCH_GO"] = go;
  Background bg({test_program("counters_touch"), "10", "200"}, opts);
  REQUIRE(bg.wait_for_line("touched") == "touched");
  // Its stderr (the "counting" line) and stdout (the JSON) in one pipe.
  Background stat({"sh", "-c", "exec \"$0\" \"$@\" 2>&1", fxprof_bin(), "stat", "--json", "-e",
                   "context-switches", "-p", std::to_string(bg.pid()), "-d", "60"});
  REQUIRE(stat.wait_for_line("fxprof: counting pid") != "");
  { std::ofstream(go) << 'g'; }
  const std::string json = stat.wait_for_line("\"events\"");
  INFO(stat.out() << stat.err());
  REQUIRE(!json.empty());
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, stat.out().substr(stat.out().find('{')));
  const double cs = double(uint64_t(doc["events"].at(0)["value"]));
  CHECK(cs >= 200);
  CHECK(cs <= 201 * 1.25 + 10);
  REQUIRE(doc["processes"].get_array().size() == 1);
  CHECK(std::string_view(doc["processes"].at(0)["name"]) == "counters_touch");
  CHECK(double(doc["elapsedSeconds"]) < 30);  // ended with the process, not at --duration
}

TEST_CASE(
    "stat --cache-sim: a stride through an array larger than the caches misses, one that fits does not") {
  // An 8 MiB last level (this VM's host has 384 MiB of L3): 32 MiB does not fit, 16 KiB fits even D1.
  auto big = run({fxprof_bin(), "stat", "--cache-sim", "--ll-size", "8388608", "--json", "--",
                  test_program("counters_stride"), std::to_string(32 << 20), "2"});
  INFO(big.err);
  REQUIRE(big.status == 0);
  CHECK(big.err.find("under Cachegrind") != std::string::npos);
  CHECK(big.err.find("20-100x slower") != std::string::npos);
  simdjson::dom::parser p1, p2;
  auto b = parse_json(p1, big.out.substr(big.out.find('{')));
  CHECK(bool(b["simulated"]));
  REQUIRE(b["topByD1Misses"].get_array().size() > 0);
  CHECK(std::string_view(b["topByD1Misses"].at(0)["function"]).find("stride_walk") != std::string_view::npos);
  CHECK(std::string_view(b["topByLLMisses"].at(0)["function"]).find("stride_walk") != std::string_view::npos);
  // stride_walk reads one byte per 64-byte line: every read misses D1, and LL too (32 MiB > 8 MiB).
  auto walk = b["topByD1Misses"].at(0)["counts"];
  CHECK(double(uint64_t(walk["D1mr"])) >= 0.9 * double(uint64_t(walk["Dr"])));
  CHECK(double(uint64_t(walk["DLmr"])) >= 0.9 * double(uint64_t(walk["D1mr"])));
  CHECK(double(b["lldMissRate"]) > 0.01);

  auto small = run({fxprof_bin(), "stat", "--cache-sim", "--ll-size", "8388608", "--json", "--",
                    test_program("counters_stride"), std::to_string(16 << 10), "4000"});
  INFO(small.err);
  REQUIRE(small.status == 0);
  auto s = parse_json(p2, small.out.substr(small.out.find('{')));
  // What misses here is the loader's and libc's first touches; stride_walk's own reads hit D1.
  CHECK(double(s["d1MissRate"]) < 0.02);
  CHECK(double(s["lldMissRate"]) < 0.01);
  REQUIRE(s["topByD1Misses"].get_array().size() > 0);
  bool found = false;
  for (simdjson::dom::element f : simdjson::dom::array(s["topByD1Misses"]))
    if (std::string_view(f["function"]).find("stride_walk") != std::string_view::npos) {
      found = true;
      CHECK(double(uint64_t(f["counts"]["D1mr"])) < 0.01 * double(uint64_t(f["counts"]["Dr"])));
    }
  if (!found) SUCCEED("stride_walk had no D1 miss at all");
  auto text = run({fxprof_bin(), "stat", "--cache-sim", "--", test_program("counters_stride"), "4096", "1"});
  CHECK(text.err.find("D1 miss rate (simulated)") != std::string::npos);
  CHECK(text.err.find("Top functions by D1 misses (simulated):") != std::string::npos);
}

TEST_CASE("record -e page-faults: the samples are in the function that touches the pages") {
  TempDir dir;
  const std::string out = dir.file("faults.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "-e", "page-faults", "-o", out, "--",
                test_program("counters_touch"), "5000"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("fxprof: sampled on page-faults, one sample per 1 event: ") != std::string::npos);
  CHECK(lint_gecko_profile(read_profile_text(out)).empty());
  auto rep = run({fxprof_bin(), "report", "--json", out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out);
  // One sample per fault: those the reader kept and those it lost (a fault storm on a loaded machine
  // outruns the DWARF unwinding; each lost one is counted) add up to the faults.
  const double samples = double(uint64_t(doc["samples"]));
  const double lost = double(uint64_t(doc["lostRecords"]));
  CHECK(samples >= 500);  // the buffer holds ~1,800 however slow the reader (ASan)
  CHECK(samples + lost >= 5000);
  CHECK(samples + lost <= 5000 * 1.05 + 300);
  auto top = doc["sections"].at(0)["topFunctionsBySelf"].at(0);
  CHECK(std::string_view(top["name"]).starts_with("touch_pages("));
  const double in_touch = double(uint64_t(top["selfSamples"]));
  CHECK(in_touch >= samples * 0.95);
  CHECK(in_touch + lost >= 5000 * 0.98);
}

TEST_CASE("record -e: refused combinations and events this machine lacks say why") {
  auto two = run({fxprof_bin(), "record", "-e", "page-faults,cs", "--", "true"});
  CHECK(two.status == 2);
  CHECK(two.err ==
        "fxprof record: one event per recording: the stacks of two events would add up in one call "
        "tree (record once per event, or count several with `fxprof stat -e page-faults,cs`) (try "
        "`fxprof record --help`)\n");
  auto freq = run({fxprof_bin(), "record", "-F", "99", "-e", "page-faults", "--", "true"});
  CHECK(freq.status == 2);
  CHECK(freq.err.find("with -e the samples follow the event: use -c PERIOD") != std::string::npos);
  if (!fxprof::counters::have_pmu()) {
    TempDir dir;
    auto hw =
        run({fxprof_bin(), "record", "--save-only", "-o", dir.file("p.json"), "-e", "cycles", "--", "true"});
    CHECK(hw.status == 1);
    CHECK(hw.err.rfind("fxprof: cannot sample on cycles: no hardware counters on this machine (no PMU", 0) ==
          0);
    CHECK(hw.err.find("Sampling works on the software events") != std::string::npos);
  }
}

TEST_CASE("every recording has page-fault and context-switch tracks per process, listed by the front end") {
  TempDir dir;
  const std::string out = dir.file("tracks.json.gz");
  auto r = run({fxprof_bin(), "record", "--save-only", "--no-symbolicate", "-o", out, "--",
                test_program("counters_touch"), "20000", "20"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, text);
  double faults = 0, switches = 0;
  std::set<std::string> names;
  for (simdjson::dom::element c : simdjson::dom::array(doc["counters"])) {
    const std::string name{std::string_view(c["name"])};
    names.insert(name);
    double sum = 0;
    for (simdjson::dom::element row : simdjson::dom::array(c["samples"]["data"]))
      sum += double(int64_t(row.at(1)));
    if (name == "Page faults (minor)") faults = sum;
    if (name == "Context switches") switches = sum;
  }
  CHECK(names.count("Page faults (minor)"));
  CHECK(names.count("Context switches"));
  CHECK(faults >= 20000 * 0.95);  // those before the first 10 ms tick count at it
  CHECK(faults <= 20000 * 1.05 + 300);
  CHECK(switches >= 20);
  ProfilerCli cli;
  auto load = cli.load(out);
  INFO(load.out << load.err);
  REQUIRE(load.status == 0);
  auto list = cli.cmd({"counter", "list", "--json"});
  INFO(list.out << list.err);
  REQUIRE(list.status == 0);
  simdjson::dom::parser lp;
  std::set<std::string> listed;
  for (simdjson::dom::element c : simdjson::dom::array(parse_json(lp, list.out)["counters"]))
    listed.insert(std::string(std::string_view(c["name"])));
  CHECK(listed.count("Page faults (minor)"));
  CHECK(listed.count("Context switches"));
  CHECK(listed.count("RSS"));
}

TEST_CASE("tracepoints: stat counts every write(2), record -e samples each in the function that wrote") {
  const std::vector<std::string> prog{test_program("counters_writes"), "1500"};
  Stat s;
  stat_json(s, {"-e", "syscalls:sys_enter_write"}, prog);
  INFO(s.r.err << s.json);
  REQUIRE(s.r.status == 0);
  CHECK(s.count("syscalls:sys_enter_write") == 1500);
  TempDir dir;
  const std::string out = dir.file("writes.json.gz");
  std::vector<std::string> cmd{fxprof_bin(), "record", "--save-only", "-e", "syscalls:sys_enter_write",
                               "-o",         out,      "--"};
  cmd.insert(cmd.end(), prog.begin(), prog.end());
  auto r = run(cmd);
  INFO(r.err);
  REQUIRE(r.status == 0);
  auto rep = run({fxprof_bin(), "report", "--json", "--limit", "20", out});
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out);
  const double samples = double(uint64_t(doc["samples"]));
  const double lost = double(uint64_t(doc["lostRecords"]));
  CHECK(samples + lost >= 1500);
  CHECK(samples + lost <= 1510);  // a lost mmap or comm record counts too
  CHECK(samples >= 500);
  double in_writer = 0;
  for (simdjson::dom::element f : simdjson::dom::array(doc["sections"].at(0)["topFunctionsByTotal"]))
    if (std::string_view(f["name"]).starts_with("write_bytes("))
      in_writer = double(uint64_t(f["totalSamples"]));
  CHECK(in_writer >= samples * 0.95);
}

TEST_CASE("stat as an ordinary user (paranoid 2): user space only, switches <not counted> rather than 0") {
  REQUIRE(geteuid() == 0);  // the suite runs as root and drops to the test user here
  TempDir dir;
  CmdOptions opts = as_test_user(dir);
  auto r = run({fxprof_bin(), "stat", "-e", "page-faults,context-switches", "--",
                test_program("counters_touch"), "3000", "5"},
               opts);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("(user space only):") != std::string::npos);
  CHECK(r.err.find("fxprof: kernel.perf_event_paranoid lets ordinary users count only user space") !=
        std::string::npos);
  const size_t at = r.err.find(" context-switches\n");
  REQUIRE(at != std::string::npos);
  CHECK(r.err.substr(r.err.rfind('\n', at) + 1, at - r.err.rfind('\n', at)).find("<not counted>") !=
        std::string::npos);
  const size_t pf = r.err.find(" page-faults");
  REQUIRE(pf != std::string::npos);
  const std::string line = r.err.substr(r.err.rfind('\n', pf) + 1, pf - r.err.rfind('\n', pf));
  std::string digits;
  for (char c : line)
    if (c >= '0' && c <= '9') digits += c;
  REQUIRE(!digits.empty());
  CHECK(std::stol(digits) >= 3000);  // the faults of the program's own code are user-mode faults
}

TEST_CASE("stat: the program runs with the caller's fd limit, not the one fxprof raised for its events") {
  auto plain = run({"sh", "-c", "ulimit -n; ulimit -Hn"});
  auto counted = run({fxprof_bin(), "stat", "-e", "page-faults", "--", "sh", "-c", "ulimit -n; ulimit -Hn"});
  INFO(counted.err);
  REQUIRE(counted.status == 0);
  CHECK(counted.out == plain.out);
}
