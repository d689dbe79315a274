// The critical path (model/critical_path.h) end to end: `fxprof record` (off-CPU with the eBPF waker tracer:
// the suite runs as root) on programs with known answers (tests/programs/offcpu/critical_chain.cpp), then
// `fxprof report --critical-path --json` and `fxprof export folded --critical-path` on the saved profile.
// Shares are of the path's time outside run-queue delay ([preempted]): how long the scheduler kept a thread
// waiting for a CPU depends on the machine's load, what the path ran does not.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "tests/e2e/e2e.h"

using namespace fxprof::test;

namespace {

struct PathShares {
  double function = 0;  // total share of the function asked for, on a thread other than the one asked about
  double preempted = 0;
  std::string text;
};

PathShares report_path(const std::string& profile, const std::string& function,
                       std::vector<std::string> extra) {
  std::vector<std::string> cmd{fxprof_bin(), "report", "--critical-path", "--json"};
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  cmd.push_back(profile);
  auto rep = run(cmd);
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  PathShares out;
  out.text = rep.out;
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out)["criticalPath"];
  for (simdjson::dom::element f : simdjson::dom::array(doc["functions"]))
    if (std::string_view(f["function"]).find(function) != std::string_view::npos && !bool(f["own"]))
      out.function += double(f["total"]);
  for (simdjson::dom::element k : simdjson::dom::array(doc["parts"]))
    if (std::string_view(k["kind"]) == "[preempted]") out.preempted += double(k["share"]);
  return out;
}

// The total percentage `profiler-cli thread functions` gives the first function whose name holds `name`
// ("f-7. prog!name - self: 10 (3.1%), total: 290 (91.2%)"); -1 when none.
double cli_total_percent(const std::string& functions, const std::string& name) {
  for (size_t at = functions.find(name); at != std::string::npos; at = functions.find(name, at + 1)) {
    const size_t eol = functions.find('\n', at);
    const std::string line = functions.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    const size_t total = line.find("total: ");
    const size_t open = total == std::string::npos ? total : line.find('(', total);
    if (open != std::string::npos) return std::stod(line.substr(open + 1));
  }
  return -1;
}

// Records `argv` (a program of ours that logs its own CPU times into `log`) into DIR/p.json.gz, raw addresses
// kept (record's default).
std::string record_logged(TempDir& dir, const std::vector<std::string>& argv, const CpuLog& log) {
  const std::string out = dir.file("p.json.gz");
  auto r = record(out, argv, {kWakersFromStart}, {.env = {{CpuLog::kVariable, log.path()}}});
  INFO(r.err << log.text());
  REQUIRE(r.status == 0);
  return out;
}

// critical_chain's request over a pipe to a child process that computes for 300 ms by its own clock.
std::string record_child_request(TempDir& dir) {
  CpuLog log;
  const std::string out = record_logged(dir, {test_program("critical_chain"), "process"}, log);
  INFO(log.text());
  REQUIRE(log.ms("child_compute") >= 300);
  return out;
}

}  // namespace

TEST_CASE("critical path: A waits on B's queue, B on C's, C computes: A's path is C's compute",
          "[e2e][critical]") {
  REQUIRE(geteuid() == 0);  // the wakers come from the eBPF tracer
  TempDir dir;
  CpuLog log;
  const std::string out = record_logged(dir, {test_program("critical_chain")}, log);
  INFO(log.text());
  REQUIRE(log.ms("compute") >= 300);
  const PathShares s = report_path(out, "cp_compute", {"--thread", "cp_a"});
  INFO(s.text);
  REQUIRE(s.preempted < 1);
  // The rest is the hops between the threads and their starts, which a loaded machine stretches (0.899 at
  // load 19): four fifths of what is not run-queue time is C's compute two wakes away.
  CHECK(s.function / (1 - s.preempted) >= 0.8);

  // The folded path: the same compute, under C's root frame.
  auto folded =
      run({fxprof_bin(), "export", "folded", "--critical-path", "--thread", "cp_a", out, "-o", "-"});
  INFO(folded.err);
  REQUIRE(folded.status == 0);
  uint64_t all = 0, compute = 0;
  for (std::string_view rest = folded.out; !rest.empty();) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    const size_t sp = line.rfind(' ');
    if (sp == std::string_view::npos) continue;
    const uint64_t n = std::stoull(std::string(line.substr(sp + 1)));
    all += n;
    if (line.starts_with("cp_c (tid ") && line.find("cp_compute") != std::string_view::npos) compute += n;
  }
  INFO(folded.out.substr(0, 2000));
  CHECK(all > 0);
  CHECK(double(compute) / double(all) >= 0.8 * (1 - s.preempted));
}

TEST_CASE("critical path: a request waiting on a pipe to a child process crosses into the child's function",
          "[e2e][critical]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  const std::string out = record_child_request(dir);
  const PathShares s = report_path(out, "cp_child_compute", {});  // the main thread of the first process
  INFO(s.text);
  REQUIRE(s.preempted < 1);
  CHECK(s.function / (1 - s.preempted) >= 0.8);

  // A thread that is not there, a range outside it: one line each.
  auto bad = run({fxprof_bin(), "report", "--critical-path", "--thread", "nosuch", out});
  CHECK(bad.status != 0);
  CHECK(bad.err.find("no thread 'nosuch'") != std::string::npos);
  auto range = run({fxprof_bin(), "report", "--critical-path", "--time-range", "5,1", out});
  CHECK(range.status != 0);
  CHECK(range.err.find("--time-range") != std::string::npos);
}

TEST_CASE("critical path: record writes the track 'critical path of T', and the URL opens a recorded thread",
          "[e2e][critical]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  // Served lazily (raw addresses): the front end names the path's frames of the child through our server.
  const std::string out = record_child_request(dir);
  const std::string text = read_profile_text(out);
  CHECK(lint_gecko_profile(text).empty());
  // The request's process has its track; the child, which never waited for long, none.
  size_t tracks = 0;
  for (const ThreadSummary& t : summarize(text)) tracks += t.name.starts_with("critical path of ");
  CHECK(tracks == 1);

  ProfilerCli cli;
  auto server = load_through_fxprof(cli, out);
  REQUIRE(cli.select_thread("critical path of critical_chain"));
  // The path's samples outside run-queue delay ([preempted]: the machine's load, in the Idle category that
  // profiler-cli leaves out): the child's compute, named by the front end through our server.
  auto fns = cli.cmd({"thread", "functions"});
  INFO(fns.out << fns.err);
  REQUIRE(fns.status == 0);
  CHECK(cli_total_percent(fns.out, "cp_child_compute") >= 80);
  auto tree = cli.cmd({"thread", "samples-top-down"});
  INFO(tree.out);
  REQUIRE(tree.status == 0);
  CHECK(tree.out.find("critical_chain (tid ") != std::string::npos);  // the root: the thread it ran on

  // `report` totals recorded samples only: the track is not read back (its samples would count twice).
  auto rep = run({fxprof_bin(), "report", "--threads", "--json", out});
  REQUIRE(rep.status == 0);
  CHECK(rep.out.find("critical path of") == std::string::npos);
  // The printed URL opens the child, whose CPU the track repeats, not the track.
  CHECK(!selected_by_url(server->profiler_url()).starts_with("critical path of"));
}

TEST_CASE("latency weighting: a serial function's share rises by the program's own parallelism",
          "[e2e][critical]") {
  TempDir dir;
  CpuLog log;
  const std::string out = record_logged(dir, {test_program("latency_phases")}, log);
  INFO(log.text());
  const double serial = log.ms("serial"), parallel = log.ms("parallel"), running = log.ms("parallel_running");
  REQUIRE(serial >= 200);
  REQUIRE(parallel >= 600);
  auto share = [&](std::vector<std::string> extra) {
    std::vector<std::string> cmd{fxprof_bin(), "report", "--json", "--limit", "50"};
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    cmd.push_back(out);
    auto rep = run(cmd);
    INFO(rep.out << rep.err);
    REQUIRE(rep.status == 0);
    simdjson::dom::parser parser;
    auto doc = parse_json(parser, rep.out);
    for (simdjson::dom::element f : simdjson::dom::array(doc["sections"].at(0)["topFunctionsByTotal"]))
      if (std::string_view(f["name"]).starts_with("lat_serial")) return double(f["totalPercentage"]) / 100;
    return 0.0;
  };
  const double cpu = share({}), latency = share({"--latency"});
  // CPU: its share of the CPU time; latency: of the time the program ran (in the parallel phase: the time
  // at least one of its threads ran, as the threads' own clocks say).
  const double want_cpu = serial / (serial + parallel), want_latency = serial / (serial + running);
  INFO("cpu " << cpu << " want " << want_cpu << "; latency " << latency << " want " << want_latency);
  CHECK(std::abs(cpu - want_cpu) <= 0.05);
  CHECK(std::abs(latency - want_latency) <= 0.06);
  CHECK(latency / cpu == Approx(want_latency / want_cpu).epsilon(0.15));
  // With --critical-path it is an error, said on one line.
  auto bad = run({fxprof_bin(), "report", "--latency", "--critical-path", out});
  CHECK(bad.status != 0);
  CHECK(bad.err.find("--latency") != std::string::npos);
}

TEST_CASE("wait blame: A's waits go to B's hand-over, B's to C's, with their stacks", "[e2e][critical]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  CpuLog log;
  const std::string out = record_logged(dir, {test_program("critical_chain")}, log);
  INFO(log.text());
  REQUIRE(log.ms("compute") >= 300);
  auto rep = run({fxprof_bin(), "report", "--wait-blame", "--thread", "cp_a", "--json", out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out)["waitBlame"];
  // A waited from its start until B's hand-over, B (on the path meanwhile) until C's: each ended by the
  // waker's stage function, for at least C's compute time (its CPU time; its wall time is no shorter).
  double by_b = 0, by_c = 0;
  for (simdjson::dom::element w : simdjson::dom::array(doc["wakers"])) {
    const std::string_view waker = w["waker"];
    std::string stack;
    for (simdjson::dom::element f : simdjson::dom::array(w["stack"]))
      stack += std::string(std::string_view(f)) + ";";
    if (waker.starts_with("cp_b ") && stack.find("stage_b") != std::string::npos) by_b += double(w["ms"]);
    if (waker.starts_with("cp_c ") && stack.find("stage_c") != std::string::npos) by_c += double(w["ms"]);
  }
  CHECK(by_b >= 0.9 * log.ms("compute"));
  CHECK(by_c >= 0.9 * log.ms("compute"));
  CHECK(double(doc["leftOutMs"]) < 0.1 * log.ms("compute"));
  auto text = run({fxprof_bin(), "report", "--wait-blame", "--thread", "cp_a", out});
  CHECK(text.status == 0);
  CHECK(text.out.find("Who ended the waits") != std::string::npos);
  auto bad = run({fxprof_bin(), "report", "--include-irq", out});
  CHECK(bad.status != 0);
  CHECK(bad.err.find("--include-irq goes with --wait-blame") != std::string::npos);
}

TEST_CASE("critical path: a pool worker waiting for a lock reaches the holder's sleep", "[e2e][critical]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  CpuLog log;
  const std::string out = record_logged(dir, {test_program("pool_sleeper")}, log);
  INFO(log.text());
  // The worker that waited longest: the lock came to it last, through the others' hand-overs.
  int longest = 0;
  for (int n = 1; n < 8; ++n)
    if (log.ms("wait_" + std::to_string(n)) > log.ms("wait_" + std::to_string(longest))) longest = n;
  const double waited = log.ms("wait_" + std::to_string(longest));
  REQUIRE(waited >= 100);
  auto rep = run({fxprof_bin(), "report", "--critical-path", "--json", "--thread",
                  "pool_w" + std::to_string(longest), out});
  INFO(rep.out << rep.err);
  REQUIRE(rep.status == 0);
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, rep.out)["criticalPath"];
  double sleep = 0, preempted = 0;
  for (simdjson::dom::element k : simdjson::dom::array(doc["parts"])) {
    if (std::string_view(k["kind"]) == "sleep") sleep += double(k["ms"]);
    if (std::string_view(k["kind"]) == "[preempted]") preempted += double(k["ms"]);
  }
  // Its wait, outside run-queue delay (the machine's load), was the holder's sleep.
  CHECK(sleep >= 0.8 * (waited - preempted));
}
