// Safe by default (issue 23): outputs never destroy what is not theirs (devices, FIFOs, symlinks, folders:
// private nodes under a temporary folder, never the system's), hostile profiles (names with escape
// sequences) and signals with --heap; a profile larger than the memory allowed: memory_limit_test.cpp.
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

// ~30 ms of CPU in a shell: enough samples for a profile, quick to record.
const std::vector<std::string> kShortWork = {"sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"};

CmdResult record_to(const std::string& out, const std::vector<std::string>& extra = {"--save-only"}) {
  std::vector<std::string> argv{fxprof_bin(), "record", "--no-symbolicate", "-q", "-o", out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), kShortWork.begin(), kShortWork.end());
  return run(argv);
}

void make_null_device(const std::string& path) {
  REQUIRE(::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);  // what /dev/null is
}

void check_still_null_device(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(st.st_rdev == makedev(1, 3));
}

}  // namespace

TEST_CASE("record -s -o DEVICE writes to the device and leaves it a device") {
  TempDir dir;
  const std::string null = dir.file("null");
  make_null_device(null);
  auto r = record_to(null);
  INFO(r.err);
  CHECK(r.status == 0);
  check_still_null_device(null);
  // Served profiles are read back from their file: a device needs --save-only, said before launching.
  const std::string marker = dir.file("ran");
  auto served = run({fxprof_bin(), "record", "-n", "-o", null, "--", "sh", "-c", "touch " + marker});
  CHECK(served.status == 2);
  CHECK(served.err == "fxprof record: " + null +
                          " is not a regular file: add --save-only to write the profile to it (try `fxprof "
                          "record --help`)\n");
  CHECK(::access(marker.c_str(), F_OK) != 0);
  // The exports are named after -o: a device gives them no name (it once wrote "-.svg" for `-o -`).
  auto exported =
      run({fxprof_bin(), "record", "-s", "--export", "svg", "-o", null, "--", "sh", "-c", "touch " + marker});
  CHECK(exported.status == 2);
  CHECK(exported.err == "fxprof record: --export writes beside -o, and " + null +
                            " is not a regular file: give -o a file name (try `fxprof record --help`)\n");
  CHECK(::access(marker.c_str(), F_OK) != 0);
  check_still_null_device(null);
}

TEST_CASE("record -o DIRECTORY is refused before the program is launched") {
  TempDir dir;
  const std::string marker = dir.file("ran");
  auto r =
      run({fxprof_bin(), "record", "--save-only", "-o", dir.path(), "--", "sh", "-c", "touch " + marker});
  CHECK(r.status == 1);
  CHECK(r.err == "fxprof: cannot write " + dir.path() + ": it is a directory\n");
  CHECK(::access(marker.c_str(), F_OK) != 0);
}

TEST_CASE("export, symbolicate and diff: a symlink is followed, a FIFO and a device are streams") {
  TempDir dir;
  const std::string profile = dir.file("p.json");
  {
    auto r = record_to(profile);
    INFO(r.err);
    REQUIRE(r.status == 0);
  }
  // A symlink to a regular file: the file gets the output, the link stays.
  const std::string target = dir.file("target.folded"), link = dir.file("link.folded");
  { std::ofstream(target) << "old\n"; }
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  auto e = run({fxprof_bin(), "export", "folded", "--no-symbolicate", profile, "-o", link});
  INFO(e.err);
  REQUIRE(e.status == 0);
  struct stat st {};
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  auto folded = fxprof::read_file(target);
  REQUIRE(folded);
  CHECK(folded->find("sh") != std::string::npos);
  CHECK(folded->find("old") == std::string::npos);

  // A FIFO with a reader: the reader gets the folded stacks, the FIFO stays.
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] {
    std::ifstream in(fifo);
    got.assign(std::istreambuf_iterator<char>(in), {});
  });
  auto f = run({fxprof_bin(), "export", "folded", "--no-symbolicate", profile, "-o", fifo});
  reader.join();
  INFO(f.err);
  CHECK(f.status == 0);
  CHECK(got == *folded);
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));

  // A device: symbolicate and diff write to it, it stays a device.
  const std::string null = dir.file("null");
  make_null_device(null);
  auto s = run({fxprof_bin(), "symbolicate", profile, "-o", null});
  INFO(s.err);
  CHECK(s.status == 0);
  auto d = run({fxprof_bin(), "diff", "--no-inline", profile, profile, "-o", null});
  INFO(d.err);
  CHECK(d.status == 0);
  check_still_null_device(null);
  // A directory: a one-line error.
  auto x = run({fxprof_bin(), "export", "svg", "--no-symbolicate", profile, "-o", dir.path()});
  CHECK(x.status == 1);
  CHECK(x.err == "fxprof: cannot write " + dir.path() + ": it is a directory\n");
}

TEST_CASE("with --heap, SIGTERM, SIGHUP and SIGINT to fxprof reach the program and the profile is written") {
  // The heap reader thread used to start before the signals were blocked: the kernel delivered them to it
  // and fxprof died at once, with no profile, leaving the program running.
  for (int sig : {SIGTERM, SIGHUP, SIGINT}) {
    INFO("signal " << sig);
    TempDir dir;
    const std::string out = dir.file("p.json");
    // The shell works ~25 ms first: a recording without a sample is (rightly) no profile, and a signal right
    // after `exec sleep` could come before any sample or sampled allocation (seen once on a fresh clone).
    Background rec({fxprof_bin(), "record", "--heap", "--save-only", "--no-symbolicate", "-q", "-o", out,
                    "--", "sh", "-c",
                    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo ready; exec sleep 60"});
    REQUIRE(rec.wait_for_line("ready", std::chrono::seconds(60)) == "ready");
    REQUIRE(::kill(rec.pid(), sig) == 0);  // to fxprof alone: it is passed on to the program
    const int status = rec.stop(0, std::chrono::seconds(60));
    INFO(rec.err());
    CHECK(status == 128 + sig);  // the program's status: sleep died of the signal fxprof passed on
    REQUIRE(::access(out.c_str(), F_OK) == 0);
    const std::string text = read_profile_text(out);
    CHECK(lint_gecko_profile(text).empty());
    CHECK(text.find("sleep") != std::string::npos);
  }
}
