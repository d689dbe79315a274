// Names from profile files printed on a terminal: control characters are shown, never sent.
#include "base/terminal.h"

#include <catch2/catch.hpp>

using fxprof::terminal_safe;

TEST_CASE("terminal_safe escapes C0, DEL, C1 and bytes that are not UTF-8, keeps printable UTF-8") {
  CHECK(terminal_safe("main") == "main");
  CHECK(terminal_safe("std::vector<int>::push_back(int&&) \\ ok") ==
        "std::vector<int>::push_back(int&&) \\ ok");
  CHECK(terminal_safe("caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x94\xa5") ==
        "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x94\xa5");
  CHECK(terminal_safe("\x1b[2J\x1b]52;c;aGk=\x07") == "\\e[2J\\e]52;c;aGk=\\x07");
  CHECK(terminal_safe(std::string_view("a\0b\n\t\r\x7f", 7)) == "a\\x00b\\n\\t\\r\\x7f");
  CHECK(terminal_safe("\xc2\x9b"
                      "31m \xc2\x85 \xc2\xa0") == "\\u009b31m \\u0085 \xc2\xa0");  // C1; NBSP stays
  CHECK(terminal_safe("\x9b\xff\xc3(\xe0\x80\x80\xed\xa0\x80") ==
        "\\x9b\\xff\\xc3(\\xe0\\x80\\x80\\xed\\xa0\\x80");  // stray, invalid, overlong, surrogate
}

TEST_CASE("redact_urls hides every URL's query string and user information, keeps the rest") {
  using fxprof::redact_urls;
  CHECK(
      redact_urls("cannot reach https://bucket.s3.example/p.json.gz?X-Amz-Signature=abc&X-Amz-Credential=k: "
                  "timeout") == "cannot reach https://bucket.s3.example/p.json.gz?<redacted>: timeout");
  CHECK(redact_urls("http://user:pw@host:8080/x and http://h/y?t=1#frag, http://h/z#f.") ==
        "http://<redacted>@host:8080/x and http://h/y?<redacted>, http://h/z.");
  CHECK(redact_urls("'https://h/a?s=1' \"http://h/b?s=2\"") ==
        "'https://h/a?<redacted>' \"http://h/b?<redacted>\"");
  CHECK(redact_urls("no url here: a?b=c") == "no url here: a?b=c");
  CHECK(redact_urls("http://h?x=1") == "http://h?<redacted>");
  CHECK(redact_urls(redact_urls("http://h/p?x=1: no")) == "http://h/p?<redacted>: no");  // idempotent
}
