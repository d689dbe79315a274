// fxprof base: hexadecimal numbers and byte strings, as the formats we read write them: perf maps and the
// Gecko profile's "0x..." frame locations, the symbolication API's addresses, build IDs (code IDs).
// One parser for all, std::from_chars underneath: no locale, no allocation, overflow is an error.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace fxprof {

// Hex digits, with or without a "0x"/"0X" prefix; false for an empty string, any other character or a
// value above 64 bits (leading zeros are fine).
bool parse_hex(std::string_view s, uint64_t& v);

// Pairs of hex digits -> bytes (a build ID); empty on an odd length or a non-hex character.
std::vector<uint8_t> parse_hex_bytes(std::string_view hex);

}  // namespace fxprof
