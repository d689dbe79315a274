#include "base/fd.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

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

TEST_CASE("map_anonymous: zeroed, huge-page aligned when large; grow_anonymous keeps the contents") {
  auto small = map_anonymous(100);
  REQUIRE(small);
  CHECK(small->size() >= 100);
  CHECK(static_cast<const char*>(small->data())[99] == 0);
  auto none = map_anonymous(0);
  REQUIRE(none);
  CHECK(none->data() == nullptr);

  auto big = map_anonymous(kHugePageBytes + 1);
  REQUIRE(big);
  CHECK(reinterpret_cast<uintptr_t>(big->data()) % kHugePageBytes == 0);
  CHECK(big->size() == 2 * kHugePageBytes);
  auto* p = static_cast<unsigned char*>(big->data());
  p[0] = 1;
  p[big->size() - 1] = 2;
  const size_t old = big->size();
  REQUIRE(grow_anonymous(*big, 3 * kHugePageBytes));
  CHECK(big->size() >= 3 * kHugePageBytes);
  p = static_cast<unsigned char*>(big->data());
  CHECK(p[0] == 1);
  CHECK(p[old - 1] == 2);
  CHECK(p[old] == 0);
  CHECK(p[big->size() - 1] == 0);
  REQUIRE(grow_anonymous(*big, 10));  // never shrinks
  CHECK(big->size() >= 3 * kHugePageBytes);

  Mapping empty;
  REQUIRE(grow_anonymous(empty, 5000));
  CHECK(empty.size() >= 5000);
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

TEST_CASE("AtomicFile: 0600, nothing on disk before commit, nothing left by a killed writer") {
  test::TempDir dir;
  std::string path = dir.file("profile.json");
  auto entries = [&] {
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(dir.path())) n += e.is_regular_file() ? 1 : 0;
    return n;
  };
  {
    auto f = AtomicFile::create(path);
    REQUIRE(f);
    REQUIRE(::write(f->fd(), "{}", 2) == 2);
    CHECK(entries() == 0);  // unnamed while written
    REQUIRE(f->commit());
  }
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(entries() == 1);
  // A writer killed half-way (SIGKILL: no destructor runs) leaves no OUT.tmp.XXXX behind.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto f = AtomicFile::create(path);
    if (f) (void)!::write(f->fd(), "partial", 7);
    ::raise(SIGKILL);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(entries() == 1);
  CHECK(*read_file(path) == "{}");
}

TEST_CASE("AtomicFile::create fails at once, naming the file, where it cannot write") {
  auto f = AtomicFile::create("/nonexistent-folder/profile.json");
  REQUIRE_FALSE(f);
  CHECK(f.error() == "cannot create /nonexistent-folder/profile.json: No such file or directory");
}
