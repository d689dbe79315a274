// Tests of base/path.h.
#include "base/path.h"

#include <catch2/catch.hpp>

using fxprof::base_name;

TEST_CASE("base_name: the last component, the whole name without a slash") {
  CHECK(base_name("/usr/lib/x86_64-linux-gnu/libc.so.6") == "libc.so.6");
  CHECK(base_name("relative/dir/app") == "app");
  CHECK(base_name("app") == "app");
  CHECK(base_name("/app") == "app");
  CHECK(base_name("/usr/lib/") == "");
  CHECK(base_name("") == "");
  static_assert(base_name("/tmp/jit-12.dump") == "jit-12.dump");
}
