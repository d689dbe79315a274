#include "base/json_string.h"

#include <catch2/catch.hpp>

using namespace fxprof;

TEST_CASE("json strings escape control characters and replace invalid UTF-8") {
  std::string out;
  append_json_string(out, std::string_view("a\"b\\c\n\x01 \xC3\xA9 \xFF \xE2\x82", 15));
  CHECK(out == "\"a\\\"b\\\\c\\n\\u0001 \xC3\xA9 \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST_CASE("plain ASCII and well-formed UTF-8 pass through unchanged") {
  std::string out;
  append_json_string(out, "plain text / with slashes \xE2\x82\xAC \xF0\x9F\x94\xA5");
  CHECK(out == "\"plain text / with slashes \xE2\x82\xAC \xF0\x9F\x94\xA5\"");
  out.clear();
  append_json_string(out, std::string_view("\xED\xA0\x80", 3));  // a UTF-16 surrogate encoded in UTF-8
  CHECK(out == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
}
