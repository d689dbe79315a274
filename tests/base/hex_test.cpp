// base/hex.h: the one hex parser of perf maps, Gecko frame locations, API addresses and build IDs.
#include "base/hex.h"

#include <catch2/catch.hpp>

using fxprof::parse_hex;
using fxprof::parse_hex_bytes;

TEST_CASE("parse_hex: with or without 0x, any case, 64 bits at most", "[base]") {
  uint64_t v = 7;
  CHECK(parse_hex("0x7f3a", v));
  CHECK(v == 0x7f3a);
  CHECK(parse_hex("7F3A", v));
  CHECK(v == 0x7f3a);
  CHECK(parse_hex("0XfFfFfFfFfFfFfFfF", v));
  CHECK(v == UINT64_MAX);
  CHECK(parse_hex("00000000000000000001", v));  // leading zeros are not an overflow
  CHECK(v == 1);
  CHECK(parse_hex("0", v));
  CHECK(v == 0);
  v = 42;
  for (const char* bad : {"", "0x", "x10", "10000000000000000", "-1", "+1", " 1", "1 ", "12g", "0x0x1"}) {
    INFO(bad);
    CHECK(!parse_hex(bad, v));
    CHECK(v == 42);  // untouched on failure
  }
}

TEST_CASE("parse_hex_bytes: pairs of digits, nothing on a bad one", "[base]") {
  CHECK(parse_hex_bytes("00ff7Fa0") == std::vector<uint8_t>{0x00, 0xff, 0x7f, 0xa0});
  CHECK(parse_hex_bytes("").empty());
  CHECK(parse_hex_bytes("abc").empty());  // odd length
  CHECK(parse_hex_bytes("zz").empty());
  CHECK(parse_hex_bytes("0x12").empty());  // bytes, not a number: no prefix
}
