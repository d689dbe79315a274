// POST /source/v1: a source file of a library, as the Firefox Profiler's source view asks for it. Which files
// may be served is the symbolizer's rule (only those the debug info names).
#include "base/json_writer.h"
#include "server/internal.h"

namespace fxprof::server {
namespace {

struct SourceRequest {
  std::string_view debug_name, debug_id, file;
  uint64_t module_offset = 0;
};

// An error message for the 400 answer, or "". The views point into `parser`'s document.
std::string parse_request(simdjson::dom::parser& parser, simdjson::padded_string_view body,
                          SourceRequest& req) {
  simdjson::dom::element root;
  if (std::string e = internal::parse_object(parser, body, root); !e.empty()) return e;
  std::string_view offset;
  if (root["debugName"].get_string().get(req.debug_name) || root["debugId"].get_string().get(req.debug_id) ||
      root["moduleOffset"].get_string().get(offset) || root["file"].get_string().get(req.file))
    return "request needs the strings debugName, debugId, moduleOffset and file";
  if (!internal::parse_address(offset, req.module_offset)) return "moduleOffset is not a hex address";
  return {};
}

ApiResponse write_response(std::string_view file, std::string_view text) {
  ApiResponse r;
  r.body.reserve(text.size() + file.size() + 128);
  JsonWriter w(r.body);
  w.begin_object().key("symbolsLastModified").null().key("sourceLastModified").null();
  w.key("file").value(file).key("source").value(text).end_object();
  return r;
}

}  // namespace

ApiResponse internal::source_v1(symbolizer::Symbolizer& symbols, simdjson::padded_string_view body) {
  simdjson::dom::parser parser;
  SourceRequest req;
  if (std::string e = parse_request(parser, body, req); !e.empty()) return internal::error_response(400, e);
  auto text = symbols.source(req.debug_name, req.debug_id, req.module_offset, req.file);
  if (!text.ok())
    return internal::error_response(internal::status_of(text.refusal()), text.refusal().message);
  return write_response(req.file, text.value());
}

ApiResponse source_v1(symbolizer::Symbolizer& symbols, std::string_view request_json) {
  return internal::source_v1(symbols, simdjson::padded_string(request_json));
}

}  // namespace fxprof::server
