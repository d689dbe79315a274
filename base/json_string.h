// fxprof base: JSON string literals, for the one JSON writer (base/json_writer.h) and for literals escaped
// once and written many times through JsonWriter::raw (the server's cached names).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fxprof {

// Appends `s` as a JSON string literal, quotes included: control characters escaped, invalid UTF-8 bytes
// replaced by U+FFFD (comm names and paths are bytes, not UTF-8). Runs of plain ASCII are copied at once.
void append_json_string(std::string& out, std::string_view s);

// "not valid JSON (WHAT near byte N)": the one wording of a syntax error at byte `byte` of a JSON document.
std::string json_syntax_error(std::string_view what, uint64_t byte);

}  // namespace fxprof
