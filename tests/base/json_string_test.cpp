#include "base/json_string.h"

#include <simdjson.h>

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

TEST_CASE("every lead byte, followed by continuations or alone, gives valid UTF-8 JSON") {
  // An argument like $'\xf5\x80\x80' was copied as if F5 started a three-byte character.
  for (int lead = 0; lead < 256; ++lead) {
    for (std::string tail : {std::string(), std::string("\x80"), std::string("\x80\x80"),
                             std::string("\x80\x80\x80"), std::string("\xBF\xBF\xBF\xBF")}) {
      std::string in(1, static_cast<char>(lead));
      in += tail;
      std::string out;
      append_json_string(out, in);
      INFO("lead " << lead << " + " << tail.size() << " continuation bytes");
      CHECK(simdjson::validate_utf8(out.data(), out.size()));
      simdjson::dom::parser parser;
      std::string doc = "[" + out + "]";
      simdjson::dom::element e;
      CHECK(parser.parse(doc).get(e) == simdjson::SUCCESS);
    }
  }
}

TEST_CASE("a syntax error reads the same wherever it is found") {
  CHECK(json_syntax_error("unexpected 'x'", 17) == "not valid JSON (unexpected 'x' near byte 17)");
}
