// fxprof record --heap and the program's own descriptors and signals: the heap library never writes into a
// file the program opened under the number it inherited, says when its stream was cut, and a recorder that
// dies mid-run never takes the program with it.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/e2e/e2e.h"

namespace fxprof::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The data-quality line and the note under the figures, for a stream cut in `name`.
void check_cut_said(const CmdResult& r, const std::string& out) {
  CHECK(r.err.find("(pid ") != std::string::npos);
  CHECK(r.err.find(") was cut at ") != std::string::npos);
  CHECK(r.err.find("fxprof: heap: incomplete: the stream of 1 process(es) was cut") != std::string::npos);
  CHECK(read_profile_text(out).find("Heap stream cut: ") != std::string::npos);
}

TEST_CASE("heap: a C program that closes inherited descriptors and opens files gets only its own bytes",
          "[heap]") {
  for (const char* mode : {"--heap=full", "--heap=sampled"}) {
    TempDir dir;
    auto r = record(dir.file("p.json.gz"), {test_program("heap_fds"), "closeall", dir.path(), "200000"},
                    {mode, "--heap-rate", "64"});
    INFO(mode << "\n" << r.err);
    REQUIRE(r.status == 0);
    CHECK(slurp(dir.file("a")) == "a\n");
    CHECK(slurp(dir.file("b")) == "b\n");
    check_cut_said(r, dir.file("p.json.gz"));
  }
}

TEST_CASE("heap: a log dup2'd over every descriptor holds only the program's line", "[heap]") {
  TempDir dir;
  auto r = record(dir.file("p.json.gz"), {test_program("heap_fds"), "dup2all", dir.file("log"), "200000"},
                  {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(slurp(dir.file("log")) == "log\n");
  check_cut_said(r, dir.file("p.json.gz"));
}

TEST_CASE("heap: python3's os.closerange(3, 1024) then two files: their contents are python's", "[heap]") {
  TempDir dir;
  const std::string script =
      "import os, sys\n"
      "os.closerange(3, 1024)\n"
      "d = sys.argv[1]\n"
      "a = open(d + '/a', 'w'); b = open(d + '/b', 'w')\n"
      "keep = [bytes(1000 + i % 100) for i in range(20000)]\n"
      "a.write('12345678'); b.write('abcdefgh')\n"
      "keep += [bytearray(3000) for i in range(20000)]\n"
      "a.close(); b.close()\n";
  // (Debian's own python3, not a version manager's shell-script shim in PATH)
  auto r = record(dir.file("p.json.gz"), {"/usr/bin/python3", "-c", script, dir.path()}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(slurp(dir.file("a")) == "12345678");
  CHECK(slurp(dir.file("b")) == "abcdefgh");
  check_cut_said(r, dir.file("p.json.gz"));
}

TEST_CASE("heap: a program whose stream is whole says nothing of a cut", "[heap]") {
  TempDir dir;
  auto r = record(dir.file("p.json.gz"), {test_program("heap_prog"), "churn", "20000"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  // (The heap's own lines: under load the recorder may say other stacks are incomplete, a CPU matter.)
  CHECK(r.err.find("was cut") == std::string::npos);
  CHECK(r.err.find("heap: incomplete") == std::string::npos);
}

TEST_CASE("heap: killing fxprof leaves a --heap program running to its own exit status", "[heap]") {
  // This test process adopts the program once fxprof is gone, to read its exit status.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  TempDir dir;
  const std::string in = dir.file("in"), ready = dir.file("ready");
  REQUIRE(mkfifo(in.c_str(), 0600) == 0);
  REQUIRE(mkfifo(ready.c_str(), 0600) == 0);
  Background fxprof({fxprof_bin(), "record", "--heap=full", "--save-only", "-o", dir.file("p.json.gz"), "--",
                     test_program("heap_fds"), "handshake", in, ready});
  CHECK(slurp(ready) == "ready\n");  // blocks until the program, running under fxprof, opened it
  // The program is fxprof's only child process.
  std::string children =
      slurp("/proc/" + std::to_string(fxprof.pid()) + "/task/" + std::to_string(fxprof.pid()) + "/children");
  const pid_t program = static_cast<pid_t>(std::stol(children));
  CHECK(fxprof.stop(SIGKILL) == 128 + SIGKILL);
  { std::ofstream(in) << "go\n"; }
  int status = 0;
  REQUIRE(waitpid(program, &status, 0) == program);
  INFO("status " << status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_CASE("heap: functions named je_malloc and je_free that are no allocator are not probed", "[heap]") {
  REQUIRE(geteuid() == 0);  // as root uprobes would be attached to them
  TempDir dir;
  // 20000 calls of je_malloc(1 GiB + i) that allocate nothing: once counted as 20000 blocks of a GiB.
  auto r = record(dir.file("p.json.gz"), {test_program("heap_fakealloc"), "20000"}, {"--heap=full"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("uprobes") == std::string::npos);
  CHECK(r.err.find("own allocator") == std::string::npos);
  // What the C library allocated (stdio's buffer...): a few blocks, no GiB.
  const size_t at = r.err.find(" allocations (");
  REQUIRE(at != std::string::npos);
  const size_t from = r.err.rfind("fxprof: heap: ", at);
  REQUIRE(from != std::string::npos);
  const long allocations = std::stol(r.err.substr(from + 14, at - from - 14));
  CHECK(allocations < 100);
  CHECK(r.err.find("GiB") == std::string::npos);
  CHECK(r.err.find("TiB") == std::string::npos);
}

}  // namespace
}  // namespace fxprof::test
