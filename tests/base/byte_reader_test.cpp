// base/byte_reader.h: the bounds-checked reader of ELF, DWARF and CFI bytes.
#include "base/byte_reader.h"

#include <catch2/catch.hpp>
#include <string>

using namespace fxprof;

TEST_CASE("values, LEB128 and strings are read in order") {
  const uint8_t bytes[] = {0x34, 0x12, 0xe5, 0x8e, 0x26, 0x7f, 0x80, 0x7f, 'h', 'i', 0, 0xaa, 0xbb, 0xcc};
  ByteReader r{bytes, bytes + sizeof bytes};
  CHECK(r.get<uint16_t>() == 0x1234);
  CHECK(r.uleb() == 624485);
  CHECK(r.sleb() == -1);
  CHECK(r.sleb() == -128);
  CHECK(std::string(r.cstr()) == "hi");
  CHECK(r.fixed(3) == 0xccbbaa);
  CHECK(r.left() == 0);
  CHECK(!r.bad);
}

TEST_CASE("an overrun reads zeros, stays at the end and stays bad") {
  const uint8_t bytes[] = {1, 2, 3, 0x80};
  ByteReader r{bytes, bytes + sizeof bytes};
  CHECK(r.get<uint64_t>() == 0);
  CHECK(r.bad);
  CHECK(r.left() == 0);
  CHECK(r.u8() == 0);
  ByteReader leb{bytes + 3, bytes + 4};  // a continuation bit with nothing after it
  CHECK(leb.uleb() == 0);
  CHECK(leb.bad);
  const uint8_t unterminated[] = {'a', 'b'};
  ByteReader s{unterminated, unterminated + 2};
  CHECK(std::string(s.cstr()).empty());
  CHECK(s.bad);
  ByteReader k{bytes, bytes + sizeof bytes};
  k.skip(5);
  CHECK(k.bad);
  CHECK(k.fixed(1) == 0);
}

TEST_CASE("read_at reads a value inside the image and refuses one that does not fit") {
  const std::byte image[6] = {std::byte{1}, std::byte{0}, std::byte{0},
                              std::byte{0}, std::byte{2}, std::byte{0}};
  uint32_t v = 0;
  CHECK(read_at(std::span<const std::byte>(image), 0, v));
  CHECK(v == 1);
  CHECK(!read_at(std::span<const std::byte>(image), 3, v));
  CHECK(!read_at(std::span<const std::byte>(image), ~uint64_t{0}, v));
}
