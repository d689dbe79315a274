// base/url.h: the one URL encoder and the one from-url link.
#include "base/url.h"

#include <stdlib.h>

#include <catch2/catch.hpp>

using namespace fxprof;

TEST_CASE("url_encode keeps only the unreserved characters and what it is asked to keep") {
  CHECK(url_encode("http://h:1/a b?x=1&y#z%~._-") == "http%3A%2F%2Fh%3A1%2Fa%20b%3Fx%3D1%26y%23z%25~._-");
  CHECK(url_encode("/tmp/a b/#?.html", "/") == "/tmp/a%20b/%23%3F.html");
  CHECK(url_encode("\xC3\xA9\n") == "%C3%A9%0A");
}

TEST_CASE("from-url links start at the profiler's origin, $PROFILER_URL when set") {
  ::unsetenv("PROFILER_URL");
  CHECK(from_url_link("http://h/p.json") == "https://profiler.firefox.com/from-url/http%3A%2F%2Fh%2Fp.json/");
  ::setenv("PROFILER_URL", "https://self.example//", 1);
  CHECK(from_url_link("http://h/p.json", "/calltree/?thread=1") ==
        "https://self.example/from-url/http%3A%2F%2Fh%2Fp.json/calltree/?thread=1");
  ::unsetenv("PROFILER_URL");
}
