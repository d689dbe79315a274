// The eBPF waker tracer loaded beside the program (recorder/waker.h's WakerLoader, issue 36): the program
// starts before the tracer attaches, the wakes after the attach are named, and a data-quality line says how
// long the program ran untraced. Handshakes only: the tracer's load waits for the test's byte through
// FXPROF_TEST_WAKER_GATE, the program's wait for the test's byte through its FIFO.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "base/fd.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/offcpu_views.h"

using namespace fxprof::test;

namespace {

// Whether the thread `tid` of `pid` is blocked in read(2) (/proc/PID/task/TID/syscall names the system call
// a blocked task is in, "running" otherwise).
bool blocked_in_read(int pid, int tid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/syscall");
  std::string nr;
  return (f >> nr) && nr == "0";
}

}  // namespace

TEST_CASE(
    "off-CPU: the program starts before the eBPF waker tracer attaches, its wakes after are named and "
    "the untraced time is said",
    "[e2e][offcpu]") {
  REQUIRE(geteuid() == 0);  // the waker tracer needs root
  TempDir dir;
  const std::string gate = dir.file("gate"), go = dir.file("go"), out = dir.file("late.json.gz");
  REQUIRE(mkfifo(gate.c_str(), 0600) == 0);
  REQUIRE(mkfifo(go.c_str(), 0600) == 0);
  CmdOptions opts;
  opts.env["FXPROF_TEST_WAKER_GATE"] = gate;
  Background rec({fxprof_bin(), "record", "--save-only", "--no-symbolicate", "-v", "--off-cpu-threshold", "0",
                  "-o", out, "--", test_program("late_waker"), go},
                 opts);
  // The program runs while the tracer's load waits at the gate.
  const std::string started = rec.wait_for_line("started ");
  INFO(rec.err());
  REQUIRE(!started.empty());
  const int pid = std::stoi(started.substr(started.find(' ') + 1));
  // Let it load (O_RDWR: the open never blocks, and the byte waits in the FIFO for the loader's read).
  fxprof::UniqueFd g(open(gate.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(g.valid());
  REQUIRE(write(g.get(), "x", 1) == 1);
  REQUIRE(!rec.wait_for_err_line("eBPF waker tracer loaded").empty());
  // Attached: the program's wait in its read ends with our write, a wake the tracer sees.
  for (int i = 0; i < 60000 && !blocked_in_read(pid, pid); ++i) usleep(1000);
  REQUIRE(blocked_in_read(pid, pid));
  fxprof::UniqueFd w(open(go.c_str(), O_WRONLY | O_CLOEXEC));
  REQUIRE(w.valid());
  REQUIRE(write(w.get(), "x", 1) == 1);
  REQUIRE(rec.stop(0, std::chrono::seconds(120)) == 0);
  const std::string err = rec.err();
  INFO(err);
  // The line: the program ran untraced from its start to the attach, at most the whole recording.
  const std::string said = "off-CPU: wakers not traced for the first ";
  const size_t at = err.find(said);
  REQUIRE(at != std::string::npos);
  const double untraced_ms = std::stod(err.substr(at + said.size()));
  const size_t rec_at = err.find("recorded ");
  REQUIRE(rec_at != std::string::npos);
  const double recorded_ms = std::stod(err.substr(rec_at + 9)) * 1000;
  CHECK(untraced_ms > 0);
  CHECK(untraced_ms <= recorded_ms + 10);  // "recorded" is rounded to 10 ms
  // The wait that ended at our write names our process as its waker.
  std::string text = read_profile_text(out);
  const std::string ours = "pid " + std::to_string(getpid()) + " (not recorded)";
  size_t woken_by_us = 0;
  std::ostringstream seen;
  for (const ThreadView& t : threads_of(text))
    for (const MarkerView& m : t.markers) {
      seen << "\n  " << t.tid << " " << m.name << " " << m.start << "-" << m.end << " '" << m.waker << "'";
      if (t.tid == pid && m.waker == ours) ++woken_by_us;
    }
  INFO(seen.str());
  CHECK(woken_by_us == 1);
}
