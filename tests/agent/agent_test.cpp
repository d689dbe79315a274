// `fxprof agent` against the loopback stand-ins of Pyroscope's Push API and /ingest and Parca's WriteRaw
// (tests/share/stand_in.h) while a program of ours spins (e2e_spin, attached with -p so that the sanitizer
// build does not symbolicate every binary of the machine each second): windows arrive with the labels and
// contiguous time ranges, `go tool pprof` reads each and finds the spinning function; a stand-in that refuses
// costs dropped windows (counted on stderr) and nothing else; SIGTERM sends the current window and
// exits 0. Counts come from the stand-ins' requests and the program's CPU time, never from waiting.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <protozero/pbf_reader.hpp>

#include "tests/share/stand_in.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

CmdResult pprof_top(const TempDir& dir, const std::string& file) {
  CmdOptions go;
  go.env = {{"HOME", dir.path()}, {"PPROF_TMPDIR", dir.path()}, {"GOCACHE", dir.path() + "/gocache"}};
  return run({"go", "tool", "pprof", "-top", file}, go);
}

// A pprof's time_nanos (9) and duration_nanos (10), and its sample types' names (1: ValueType{type = 1}).
struct PprofHead {
  int64_t time_ns = 0, duration_ns = 0;
  size_t sample_types = 0;
};
PprofHead pprof_head(const std::string& gz) {
  const std::string raw = gunzip(gz);
  PprofHead h;
  protozero::pbf_reader p(raw);
  while (p.next()) {
    if (p.tag() == 9)
      h.time_ns = p.get_int64();
    else if (p.tag() == 10)
      h.duration_ns = p.get_int64();
    else if (p.tag() == 1)
      ++h.sample_types, p.skip();
    else
      p.skip();
  }
  return h;
}

// The spinning program, its CPU log saying it runs.
struct Spinner {
  CpuLog cpu;
  std::unique_ptr<Background> proc;
  Spinner() {
    CmdOptions o;
    o.env[CpuLog::kVariable] = cpu.path();
    proc = std::make_unique<Background>(std::vector<std::string>{test_program("e2e_spin")}, o);
    REQUIRE(cpu.wait_for("ready"));
  }
  std::string pid() const { return std::to_string(proc->pid()); }
};

void ok(const httplib::Request&, httplib::Response& res) { res.set_content("", "application/proto"); }

void parca_ok(const httplib::Request&, httplib::Response& res) {
  std::string trailer = "grpc-status: 0\r\n";
  std::string body(5, '\0');
  body[0] = static_cast<char>(0x80);
  body[4] = static_cast<char>(trailer.size());
  res.set_content(std::string(5, '\0') + body + trailer, "application/grpc-web+proto");
}

}  // namespace

TEST_CASE("agent: a window a period to Pyroscope and Parca, labelled, contiguous, readable", "[agent]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  Spinner spin;
  StandIn pyro(ok), parca(parca_ok);
  auto r =
      run({fxprof_bin(), "agent", "--pyroscope", pyro.origin(), "--parca", parca.origin(), "-p", spin.pid(),
           "--every", "1s", "-F", "99", "--windows", "3", "--label", "env=ci", "--host", "testhost"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("3 windows recorded, 3 sent, 0 dropped") != std::string::npos);
  auto seen = pyro.seen();
  REQUIRE(seen.size() == 3);
  REQUIRE(parca.seen().size() == 3);
  int64_t previous_end = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    CHECK(seen[i].path == "/push.v1.PusherService/Push");
    const std::vector<PushedSeries> series = decode_series(seen[i].body, false);
    REQUIRE(series.size() == 1);  // one process, on-CPU only
    std::map<std::string, std::string> labels = series[0].labels;
    CHECK(labels["__name__"] == "process_cpu");
    CHECK(labels["service_name"] == "e2e_spin");
    CHECK(labels["host"] == "testhost");
    CHECK(labels["pid"] == spin.pid());
    CHECK(labels["env"] == "ci");
    REQUIRE(series[0].raw_profiles.size() == 1);
    const std::string& gz = series[0].raw_profiles[0];
    const PprofHead head = pprof_head(gz);
    CHECK(head.sample_types == 2);  // samples/count, cpu/nanoseconds
    CHECK(head.duration_ns > 0);
    // from = the previous window's until (the pprof writer's times go through double milliseconds).
    if (i > 0) CHECK(std::abs(head.time_ns - previous_end) < 1000);
    previous_end = head.time_ns + head.duration_ns;
    const std::string file = dir.file("w" + std::to_string(i) + ".pb.gz");
    write_file(file, gz);
    auto top = pprof_top(dir, file);
    INFO(top.out << top.err);
    REQUIRE(top.status == 0);
    CHECK(top.out.find("spin_until_killed") != std::string::npos);
    // Parca got the same window, with the same labels.
    const std::vector<PushedSeries> p = decode_series(parca.seen()[i].body.substr(5), true);
    REQUIRE(p.size() == 1);
    CHECK(p[0].labels == series[0].labels);
  }
}

TEST_CASE("agent --pyroscope-ingest: a request per series to /ingest, named by the program", "[agent]") {
  REQUIRE(geteuid() == 0);
  TempDir dir;
  Spinner spin;
  StandIn pyro([](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  auto r = run({fxprof_bin(), "agent", "--pyroscope-ingest", pyro.origin(), "-p", spin.pid(), "--every", "1",
                "-F", "99", "--windows", "2", "--host", "h1"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  auto seen = pyro.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].path == "/ingest");
  CHECK(seen[0].params.find("name")->second == "e2e_spin{host=h1,pid=" + spin.pid() + "}");
  CHECK(seen[1].params.find("from")->second <= seen[1].params.find("until")->second);
  write_file(dir.file("i.pb.gz"), seen[0].multipart_profile);
  auto top = pprof_top(dir, dir.file("i.pb.gz"));
  INFO(top.out << top.err);
  CHECK(top.out.find("spin_until_killed") != std::string::npos);
}

// 5xx answers: each window tried --attempts times, then dropped with a line; the agent goes on and the
// windows after the stand-in accepts again arrive.
TEST_CASE("agent: a refusing stand-in costs dropped windows, counted, and it recovers", "[agent]") {
  REQUIRE(geteuid() == 0);
  Spinner spin;
  std::atomic<int> requests{0};
  StandIn pyro([&](const httplib::Request&, httplib::Response& res) {
    if (++requests <= 4)
      res.status = 503;
    else
      ok({}, res);
  });
  Background agent({fxprof_bin(), "agent", "--pyroscope", pyro.origin(), "-p", spin.pid(), "--every", "1s",
                    "-F", "99", "--attempts", "2", "-v"});
  REQUIRE(pyro.wait_for(6));  // 2 windows refused twice each, then accepted ones
  REQUIRE(agent.stop(SIGTERM) == 0);
  const std::string err = agent.err();
  INFO(agent.out() << err);
  const std::vector<int> answered = pyro.answered();
  CHECK(std::count(answered.begin(), answered.end(), 503) == 4);
  CHECK(err.find("dropped after 2 tries (Pyroscope refused the profile: HTTP 503") != std::string::npos);
  CHECK(err.find("2 dropped so far") != std::string::npos);
  CHECK(err.find("sending again") != std::string::npos);
  CHECK(err.find("2 dropped;") != std::string::npos);  // the summary line at the end
}

// SIGTERM in the middle of a long window: that window is sent at once and the agent exits 0.
TEST_CASE("agent: SIGTERM sends the current window and exits 0", "[agent]") {
  REQUIRE(geteuid() == 0);
  Spinner spin;
  StandIn pyro(ok);
  Background agent({fxprof_bin(), "agent", "--pyroscope", pyro.origin(), "-p", spin.pid(), "--every", "1m",
                    "-F", "99", "-v"});
  REQUIRE(agent.wait_for_line("agent: window 1 recording") != "");
  // 300 ms of the program's CPU inside the window: ~30 samples at 99 Hz.
  const double cpu0 = process_cpu_ms(spin.proc->pid());
  while (process_cpu_ms(spin.proc->pid()) < cpu0 + 300) usleep(10000);
  REQUIRE(agent.stop(SIGTERM) == 0);
  INFO(agent.out() << agent.err());
  REQUIRE(pyro.seen().size() == 1);
  CHECK(agent.err().find("1 windows recorded, 1 sent, 0 dropped") != std::string::npos);
}

namespace {

// A free loopback port with nothing listening on it: bound to port 0, read back, closed. Not a StandIn made
// and dropped at once: httplib's Server::stop() before its listening thread has started does nothing, and
// that thread then listens for ever, so the StandIn's destructor never returned (the 300 s timeout this
// test hit before, under load, when the thread started late).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  REQUIRE(ok);
  return ntohs(a.sin_port);
}

}  // namespace

// The stand-in down (nothing listens on its port) for some windows, then up on the same port: each window
// while it is down is tried, fails and is dropped with a count; once it is up the agent sends again, without
// a crash or a restart. Every wait is a line of the agent or a request seen.
TEST_CASE("agent: a stand-in that goes away and comes back: windows dropped, counted, then sent", "[agent]") {
  REQUIRE(geteuid() == 0);
  Spinner spin;
  const int port = free_port();
  Background agent({fxprof_bin(), "agent", "--pyroscope", "http://127.0.0.1:" + std::to_string(port), "-p",
                    spin.pid(), "--every", "0.2s", "-F", "99", "--attempts", "1", "-v"});
  for (int i = 0; i < 3; ++i) REQUIRE(agent.wait_for_line(": not sent: ") != "");  // 3 windows refused
  StandIn pyro(ok, port);
  REQUIRE(pyro.port() == port);
  REQUIRE(pyro.wait_for(2));  // sending again
  REQUIRE(agent.stop(SIGTERM) == 0);
  const std::string err = agent.err();
  INFO(agent.out() << err);
  CHECK(err.find("dropped after 1 try") != std::string::npos);
  CHECK(err.find("sending again") != std::string::npos);
  // The summary: every window recorded was sent or dropped, at least 3 dropped and 2 sent.
  const size_t at = err.find(" windows recorded, ");
  REQUIRE(at != std::string::npos);
  unsigned long recorded = 0, sent = 0, dropped = 0;
  const size_t line = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
  REQUIRE(std::sscanf(err.c_str() + line, "fxprof: agent: %lu windows recorded, %lu sent, %lu dropped",
                      &recorded, &sent, &dropped) == 3);
  CHECK(dropped >= 3);
  CHECK(sent >= 2);
  CHECK(sent + dropped <= recorded);
}
