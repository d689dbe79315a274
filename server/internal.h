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

// The JSON APIs as the routes call them: the body is parsed once, here, in place (the transport keeps
// SIMDJSON_PADDING bytes of capacity past it), into the endpoint's typed request; the public functions in
// server.h copy a plain string into padding and call these.
using Endpoint = ApiResponse (*)(symbolizer::Symbolizer&, simdjson::padded_string_view body);
ApiResponse symbolicate_v5(symbolizer::Symbolizer& symbols, simdjson::padded_string_view body);
ApiResponse source_v1(symbolizer::Symbolizer& symbols, simdjson::padded_string_view body);
ApiResponse asm_v1(symbolizer::Symbolizer& symbols, simdjson::padded_string_view body);

// Whether the client of the request this thread answers has gone (closed or reset its connection): long
// work checks it between steps and stops, instead of computing an answer nobody will read. A worker watches
// its connection's socket for the duration of a call (ClientWatch); without one, never gone.
bool client_gone();
class ClientWatch {
 public:
  explicit ClientWatch(int fd);
  ~ClientWatch();
  ClientWatch(const ClientWatch&) = delete;
  ClientWatch& operator=(const ClientWatch&) = delete;

 private:
  int previous_;
};

// The one wording of a body that is not a JSON object: "empty request", "malformed JSON request: <why>" or
// "malformed request: expected a JSON object"; "" when `root` is an object.
std::string parse_object(simdjson::dom::parser& parser, simdjson::padded_string_view body,
                         simdjson::dom::element& root);

// Parses "0x1234" (or decimal digits), as the APIs' requests write addresses; false on anything else or
// overflow.
bool parse_address(std::string_view s, uint64_t& v);

}  // namespace fxprof::server::internal
