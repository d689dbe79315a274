// Shared between the server's own files (not part of its public interface).
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

namespace fxprof::server::internal {

// "truncated JSON", "empty file" or "not valid JSON (<simdjson's reason>)" for a document that failed to
// parse.
std::string describe_json_error(std::string_view text, simdjson::error_code e);

}  // namespace fxprof::server::internal
