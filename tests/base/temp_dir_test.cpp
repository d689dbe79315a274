// base/temp_dir.h: private temporary folders, where they go, and that they go away.
#include "base/temp_dir.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

using namespace fxprof;

namespace {
// Sets an environment variable for one scope, restoring what was there.
struct Env {
  Env(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    ::setenv(name, value.c_str(), 1);
  }
  ~Env() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  const char* name_;
  std::optional<std::string> old_;
};
}  // namespace

TEST_CASE("a temporary folder is 0700 under its parent and is removed with what it holds") {
  std::string path;
  {
    TempFolder outer("fxprof-test");
    REQUIRE(!outer.path().empty());
    Env tmpdir("TMPDIR", outer.path());
    CHECK(temp_parent() == outer.path());
    TempFolder dir("fxprof-x");
    REQUIRE(!dir.path().empty());
    path = dir.path();
    CHECK(path.rfind(outer.path() + "/fxprof-x-", 0) == 0);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    std::ofstream(path + "/f") << "x";
    TempFolder moved(std::move(dir));
    CHECK(dir.path().empty());
    CHECK(std::filesystem::exists(path + "/f"));
  }
  CHECK(!std::filesystem::exists(path));
}

TEST_CASE("only an absolute folder is taken as the parent; $XDG_RUNTIME_DIR first when asked") {
  Env relative("TMPDIR", "relative/dir");
  CHECK(temp_parent() == "/tmp");
  Env runtime("XDG_RUNTIME_DIR", "/");
  CHECK(temp_parent(true) == "/");
  CHECK(temp_parent() == "/tmp");
}
