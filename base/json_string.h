// fxprof base: JSON string literals, shared by every module that writes JSON (the exporter's streaming
// writer, the symbolizer's API responses, the server's presymbolication).
#pragma once

#include <string>
#include <string_view>

namespace fxprof {

// Appends `s` as a JSON string literal, quotes included: control characters escaped, invalid UTF-8 bytes
// replaced by U+FFFD (comm names and paths are bytes, not UTF-8). Runs of plain ASCII are copied at once.
void append_json_string(std::string& out, std::string_view s);

}  // namespace fxprof
