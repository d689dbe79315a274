// Shared between the server's own files (not part of its public interface).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "server/server.h"

namespace fxprof::server::internal {

// {"error": message} with an HTTP status: every refusal of the JSON APIs looks like this.
ApiResponse error_response(int status, std::string_view message);

// The HTTP status for a symbolizer refusal: 404, 403, 413 or 422.
int status_of(const symbolizer::Refusal& refusal);

// Parses "0x1234" (or decimal digits), as the APIs' requests write addresses; false on anything else or
// overflow.
bool parse_address(std::string_view s, uint64_t& v);

}  // namespace fxprof::server::internal
