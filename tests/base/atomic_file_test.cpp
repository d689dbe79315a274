// What an output path means (base/fd.h resolve_output): only a regular file or a new name is replaced; a
// device, FIFO or open descriptor is a stream; a symlink is followed; a directory is refused. Devices are
// private nodes made with mknod in a temporary folder, never the system's.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof;

namespace {

Status write_all(const std::string& path, std::string_view text) {
  auto f = AtomicFile::create(path);
  if (!f) return std::move(f).take_error();
  if (::write(f->fd(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return Err("short write: " + errno_text(errno));
  return f->commit();
}

}  // namespace

TEST_CASE("a device is written as a stream, never replaced (private /dev/null and /dev/full nodes)") {
  test::TempDir dir;
  const std::string null = dir.file("null"), full = dir.file("full");
  REQUIRE(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  REQUIRE(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0);
  auto kind = AtomicFile::check(null);
  REQUIRE(kind);
  CHECK(*kind == OutputKind::kStream);
  REQUIRE(write_all(null, "profile"));
  struct stat st {};
  REQUIRE(::lstat(null.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(st.st_rdev == makedev(1, 3));
  // /dev/full: the write fails with ENOSPC, and the node stays a device.
  auto f = AtomicFile::create(full);
  REQUIRE(f);
  CHECK(f->stream());
  CHECK(::write(f->fd(), "x", 1) == -1);
  CHECK(errno == ENOSPC);
  REQUIRE(::lstat(full.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(st.st_rdev == makedev(1, 7));
}

TEST_CASE("a FIFO with a reader gets the bytes and stays a FIFO") {
  test::TempDir dir;
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // check() must not open it: that would wait for a reader, and closing it would end the reader's input.
  auto kind = AtomicFile::check(fifo);
  REQUIRE(kind);
  CHECK(*kind == OutputKind::kStream);
  std::string got;
  std::thread reader([&] {
    UniqueFd fd(::open(fifo.c_str(), O_RDONLY | O_CLOEXEC));
    char buf[256];
    for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  });
  REQUIRE(write_all(fifo, "through the pipe"));
  reader.join();
  CHECK(got == "through the pipe");
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
}

TEST_CASE("a symlink is followed: its regular target is replaced, the link stays") {
  test::TempDir dir;
  ::mkdir(dir.file("real").c_str(), 0700);
  const std::string target = dir.file("real/profile.json"), link = dir.file("link.json");
  REQUIRE(write_all(target, "old"));
  REQUIRE(::symlink("real/profile.json", link.c_str()) == 0);  // relative, as `ln -s` makes them
  REQUIRE(write_all(link, "new"));
  struct stat st {};
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(*read_file(target) == "new");
  // A dangling link: its target is created, the link stays.
  const std::string dangling = dir.file("dangling.json");
  REQUIRE(::symlink("real/created.json", dangling.c_str()) == 0);
  REQUIRE(write_all(dangling, "created"));
  REQUIRE(::lstat(dangling.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(*read_file(dir.file("real/created.json")) == "created");
  // A link to a device: the device is written to, both stay.
  const std::string null = dir.file("null"), to_null = dir.file("to-null");
  REQUIRE(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  REQUIRE(::symlink(null.c_str(), to_null.c_str()) == 0);
  REQUIRE(write_all(to_null, "gone"));
  REQUIRE(::lstat(to_null.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  REQUIRE(::lstat(null.c_str(), &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("an open descriptor's name (/dev/fd/N) is written to as a stream") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  UniqueFd r(fds[0]), w(fds[1]);
  const std::string name = "/dev/fd/" + std::to_string(w.get());
  REQUIRE(write_all(name, "abc"));
  w.reset();
  char buf[8] = {};
  CHECK(::read(r.get(), buf, sizeof buf) == 3);
  CHECK(std::string(buf) == "abc");
  // A descriptor open only for reading is refused, naming it.
  auto bad = AtomicFile::create("/dev/fd/" + std::to_string(r.get()));
  REQUIRE_FALSE(bad);
  CHECK(bad.error() == "cannot write /dev/fd/" + std::to_string(r.get()) + ": not open for writing");
}

TEST_CASE("a directory is refused, by check() and create()") {
  test::TempDir dir;
  auto kind = AtomicFile::check(dir.path());
  REQUIRE_FALSE(kind);
  CHECK(kind.error() == "cannot write " + dir.path() + ": it is a directory");
  auto f = AtomicFile::create(dir.path() + "/");
  REQUIRE_FALSE(f);
  CHECK(f.error() == "cannot write " + dir.path() + "/: it is a directory");
}

TEST_CASE("a FIFO nobody opens for reading is refused after the wait, not waited on forever") {
  test::TempDir dir;
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto f = AtomicFile::create(fifo, 100);
  REQUIRE_FALSE(f);
  CHECK(f.error() == "cannot write " + fifo + ": nobody opened the FIFO for reading within 0.1 s");
}

TEST_CASE("a link swapped in for the folder after the check is not followed") {
  // create() opens the folder component by component with O_NOFOLLOW: a plain folder works, and so does a
  // trusted link (ours) on the way, resolved before.
  test::TempDir dir;
  ::mkdir(dir.file("real").c_str(), 0700);
  REQUIRE(::symlink("real", dir.file("via").c_str()) == 0);
  REQUIRE(write_all(dir.file("via/p.json"), "through our own link"));
  CHECK(*read_file(dir.file("real/p.json")) == "through our own link");
  // The file replaced is the link's target; a later link at the final name is replaced, not followed.
  auto f = AtomicFile::create(dir.file("real/q.json"));
  REQUIRE(f);
  REQUIRE(::symlink(dir.file("elsewhere").c_str(), dir.file("real/q.json").c_str()) == 0);
  REQUIRE(f->commit());
  struct stat st {};
  REQUIRE(::lstat(dir.file("real/q.json").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(::access(dir.file("elsewhere").c_str(), F_OK) != 0);
}
