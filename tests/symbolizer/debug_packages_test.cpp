// symbolizer/debug_packages.h: the package to install for a missing debug file, from dpkg's lists (this
// machine's, and lists made here to check the rules: merged /usr, architecture suffixes, untrusted lists).
#include "symbolizer/debug_packages.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/support/support.h"

using fxprof::symbolizer::debug_packages;
using fxprof::test::TempDir;

namespace {
void write_list(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}
}  // namespace

TEST_CASE("debug packages: Debian's own libraries get their -dbgsym package, libc its -dbg", "[symbolizer]") {
  // The kernel's maps say /usr/lib; dpkg lists libc under /lib (merged /usr).
  const std::vector<std::string> bins{"/usr/lib/x86_64-linux-gnu/libc.so.6",
                                      "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/bin/python3.11"};
  CHECK(debug_packages(bins) ==
        std::vector<std::string>{"libc6-dbg", "libstdc++6-dbgsym", "python3.11-minimal-dbgsym"});
  // A binary built here belongs to no package.
  CHECK(debug_packages(std::vector<std::string>{fxprof::test::fxprof_bin()}).empty());
}

TEST_CASE("debug packages: one package once, the architecture left out, untrusted lists ignored",
          "[symbolizer]") {
  TempDir dir;
  write_list(dir.file("libfoo1:amd64.list"), "/.\n/usr\n/usr/lib/libfoo.so.1\n/usr/lib/libfoo.so.1.2\n");
  write_list(dir.file("evil.list"), "/usr/lib/libbar.so\n", 0666);  // anyone could have written it
  write_list(dir.file("bar.md5sums"), "/usr/lib/libbar.so\n");      // not a list
  const std::vector<std::string> bins{"/usr/lib/libfoo.so.1", "/usr/lib/libfoo.so.1.2", "/usr/lib/libbar.so"};
  if (::geteuid() == 0) {
    CHECK(debug_packages(bins, dir.path()) == std::vector<std::string>{"libfoo1-dbgsym"});
  } else {
    CHECK(debug_packages(bins, dir.path()).empty());  // lists not owned by root are not trusted
  }
  CHECK(debug_packages(bins, dir.file("missing")).empty());
}
