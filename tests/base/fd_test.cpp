#include "base/fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/support/support.h"

using namespace fxprof;

TEST_CASE("UniqueFd closes on destruction and on move-assignment") {
  int raw = ::open("/dev/null", O_RDONLY);
  REQUIRE(raw >= 0);
  {
    UniqueFd a(raw);
    UniqueFd b = std::move(a);
    CHECK_FALSE(a.valid());
    CHECK(b.get() == raw);
  }
  CHECK(::fcntl(raw, F_GETFD) == -1);
}

TEST_CASE("map_file and read_file report errors as one line") {
  auto m = map_file("/nonexistent/file");
  REQUIRE_FALSE(m);
  CHECK(m.error() == "cannot open /nonexistent/file: No such file or directory");
  auto d = map_file("/proc");
  REQUIRE_FALSE(d);
  CHECK(d.error() == "/proc is not a regular file");
  auto r = read_file("/proc/self/comm");
  REQUIRE(r);
  CHECK(!r->empty());
}

TEST_CASE("AtomicFile appears under its name only when committed") {
  test::TempDir dir;
  std::string path = dir.file("out.txt");
  {
    auto f = AtomicFile::create(path);
    REQUIRE(f);
    REQUIRE(::write(f->fd(), "abc", 3) == 3);
    CHECK(::access(path.c_str(), F_OK) != 0);
    REQUIRE(f->commit());
  }
  auto text = read_file(path);
  REQUIRE(text);
  CHECK(*text == "abc");
  {
    auto f = AtomicFile::create(path);
    REQUIRE(f);
    REQUIRE(::write(f->fd(), "partial", 7) == 7);
  }  // dropped without commit: the old content stays, no temporary file is left
  CHECK(*read_file(path) == "abc");
  CHECK(::rmdir(dir.path().c_str()) == -1);  // only out.txt remains
  ::unlink(path.c_str());
  CHECK(::rmdir(dir.path().c_str()) == 0);
  ::mkdir(dir.path().c_str(), 0755);
}
