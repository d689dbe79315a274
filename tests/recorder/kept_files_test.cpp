// recorder/kept_files.h: descriptors of mapped binaries, so that one deleted or replaced while it runs is
// still read; the file at its path is opened once, by the recording's table of binaries.
#include "recorder/kept_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof;
using fxprof::test::TempDir;

namespace {

struct stat stat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st;
}

bool is_elf(const std::string& path) {
  auto text = read_file(path);
  return text.ok() && text.value().starts_with(
                          "\x7f"
                          "ELF");
}

// Runs `prog` (a copy of sleep) for 600 s; returns once it has exec'd: the exec closes the pipe's write end
// (O_CLOEXEC), so end of file on the read end says it is done.
pid_t exec_sleeper(const std::string& prog) {
  int exec_pipe[2];
  REQUIRE(pipe2(exec_pipe, O_CLOEXEC) == 0);
  UniqueFd exec_r(exec_pipe[0]), exec_w(exec_pipe[1]);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    execl(prog.c_str(), "sleeper", "600", static_cast<char*>(nullptr));
    _exit(127);
  }
  exec_w.reset();
  char byte;
  REQUIRE(read(exec_r.get(), &byte, 1) == 0);
  return child;
}

}  // namespace

TEST_CASE("kept files: a binary deleted while it runs is read through its descriptor, opened once",
          "[recorder]") {
  TempDir dir;
  const std::string prog = dir.file("prog");
  std::filesystem::copy_file("/usr/bin/true", prog);
  const struct stat st = stat_of(prog);
  recorder::Binaries binaries;
  recorder::KeptFiles kept(binaries);
  const auto pid = static_cast<uint32_t>(getpid());
  CHECK(kept.keep(pid, 0x1000, 0x2000, prog, st.st_dev, st.st_ino) == prog);
  const recorder::Binary* looked_up = nullptr;  // what keep() found there, for the caller (no second stat)
  CHECK(kept.keep(pid, 0x3000, 0x4000, prog, st.st_dev, st.st_ino, &looked_up) == prog);  // nothing opened
  CHECK(binaries.opened() == 1);
  const recorder::Binary& b = binaries.get(prog);  // the table's: what the builder and the unwinder read
  REQUIRE(b.identity);
  CHECK(looked_up == &b);
  CHECK(binaries.opened() == 1);

  model::Profile profile;
  profile.processes.emplace_back().libs.push_back({});
  profile.processes[0].libs[0].path = prog;
  kept.read_deleted_libs(profile);
  CHECK(kept.deleted_read().empty());  // still there
  CHECK(profile.processes[0].libs[0].read_path.empty());

  REQUIRE(::unlink(prog.c_str()) == 0);
  kept.read_deleted_libs(profile);
  REQUIRE(kept.deleted_read() == std::vector<std::string>{prog});
  const std::string read_path = profile.processes[0].libs[0].read_path;
  CHECK(read_path.starts_with("/proc/self/fd/"));
  CHECK(is_elf(read_path));
  CHECK(kept.take().size() == 1);
}

TEST_CASE(
    "kept files: a binary replaced before it was kept is read through its mapping, a vanished one is "
    "named unreadable",
    "[recorder]") {
  TempDir dir;
  const std::string prog = dir.file("prog");
  std::filesystem::copy_file("/usr/bin/true", prog);
  const struct stat st = stat_of(prog);
  UniqueFd fd(::open(prog.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd.valid());
  const size_t len = 4096;
  void* at = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  REQUIRE(at != MAP_FAILED);
  // Replaced at its path (a rebuild): another inode there now.
  const std::string fresh = dir.file("fresh");
  std::filesystem::copy_file("/usr/bin/false", fresh);
  REQUIRE(::rename(fresh.c_str(), prog.c_str()) == 0);

  recorder::Binaries binaries;
  recorder::KeptFiles kept(binaries);
  const auto pid = static_cast<uint32_t>(getpid());
  const auto start = reinterpret_cast<uint64_t>(at);
  const std::string where = kept.keep(pid, start, start + len, prog, st.st_dev, st.st_ino);
  ::munmap(at, len);
  REQUIRE(where.starts_with("/proc/self/fd/"));  // through /proc/PID/map_files: the mapped file
  CHECK(stat_of(where).st_ino == st.st_ino);
  CHECK(kept.unreadable().empty());

  const std::string gone = dir.file("gone");
  CHECK(kept.keep(pid, 0x1000, 0x2000, gone, st.st_dev, st.st_ino + 1) == gone);
  CHECK(kept.unreadable() == std::vector<std::string>{gone});
}

// A launched program's MMAP2 record may be read after the program ended and its file was deleted (a rebuild
// while it ran; under load, the suite's deleted-binary test): the descriptor taken at its exec still reads
// it.
TEST_CASE(
    "kept files: a launched executable kept at its exec is read after the program and its file are gone",
    "[recorder]") {
  TempDir dir;
  const std::string prog = dir.file("sleeper");
  std::filesystem::copy_file("/usr/bin/sleep", prog);
  const struct stat st = stat_of(prog);
  const pid_t child = exec_sleeper(prog);
  recorder::Binaries binaries;
  recorder::KeptFiles kept(binaries);
  kept.keep_executable(static_cast<uint32_t>(child));
  kill(child, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(::unlink(prog.c_str()) == 0);

  const std::string from =
      kept.keep(static_cast<uint32_t>(child), 0x1000, 0x2000, prog, st.st_dev, st.st_ino);
  CHECK(from.starts_with("/proc/self/fd/"));
  CHECK(is_elf(from));
  CHECK(kept.unreadable().empty());
  model::Profile profile;
  profile.processes.emplace_back().libs.push_back({});
  profile.processes[0].libs[0].path = prog;
  kept.read_deleted_libs(profile);
  CHECK(kept.deleted_read() == std::vector<std::string>{prog});
  CHECK(profile.processes[0].libs[0].read_path.starts_with("/proc/self/fd/"));
}

// The race the suite's deleted-binary test found under load: the executable is kept at its exec, its mmap
// record is read while the file is still there, and the file is deleted before the unwinder opens it. The
// mapping is opened while it is there, and the same binary is given for that path once it is gone.
TEST_CASE("kept files: an executable deleted while its mapping is read is still the binary read there",
          "[recorder]") {
  TempDir dir;
  const std::string prog = dir.file("sleeper");
  std::filesystem::copy_file("/usr/bin/sleep", prog);
  const struct stat st = stat_of(prog);
  const pid_t child = exec_sleeper(prog);
  recorder::Binaries binaries;
  recorder::KeptFiles kept(binaries);
  kept.keep_executable(static_cast<uint32_t>(child));
  CHECK(kept.keep(static_cast<uint32_t>(child), 0x1000, 0x2000, prog, st.st_dev, st.st_ino) == prog);
  REQUIRE(::unlink(prog.c_str()) == 0);  // before the unwinder and the library table open it
  const recorder::Binary& b = binaries.get(prog);
  CHECK(b.identity.has_value());
  CHECK(binaries.opened() == 1);
  kill(child, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
}
