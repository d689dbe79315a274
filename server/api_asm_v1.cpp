// POST /asm/v1: the disassembly of a range of a library, as the Firefox Profiler's assembly view asks for it.
#include "base/json_writer.h"
#include "server/internal.h"

namespace fxprof::server {
namespace {

struct AsmRequest {
  std::string_view debug_name, debug_id;
  uint64_t start = 0, size = 0;
  bool until_function_end = false;
};

// An error message for the 400 answer, or "". The views point into `parser`'s document.
std::string parse_request(simdjson::dom::parser& parser, simdjson::padded_string_view body, AsmRequest& req) {
  simdjson::dom::element root;
  if (std::string e = internal::parse_object(parser, body, root); !e.empty()) return e;
  std::string_view start, size;
  if (root["debugName"].get_string().get(req.debug_name) || root["debugId"].get_string().get(req.debug_id) ||
      root["startAddress"].get_string().get(start) || root["size"].get_string().get(size))
    return "request needs the strings debugName, debugId, startAddress and size";
  if (auto v = root["continueUntilFunctionEnd"]; v.error() == simdjson::SUCCESS) {
    if (v.get_bool().get(req.until_function_end)) return "continueUntilFunctionEnd is not a boolean";
  }
  if (!internal::parse_address(start, req.start) || !internal::parse_address(size, req.size))
    return "startAddress and size must be hex numbers";
  if (req.size > symbolizer::kMaxDisassemblyBytes) return "size too large (at most 1 MiB)";
  return {};
}

ApiResponse write_response(uint64_t start, const symbolizer::Disassembly& d) {
  ApiResponse r;
  r.body.reserve(128 + d.instructions.size() * 40);
  JsonWriter w(r.body);
  w.begin_object().key("startAddress").hex_value(start).key("size").hex_value(d.size);
  w.key("arch").value(d.arch).key("syntax").begin_array().value(d.syntax).end_array();
  w.key("instructions").begin_array();
  for (const auto& [offset, text] : d.instructions) w.begin_array().value(offset).value(text).end_array();
  w.end_array().end_object();
  return r;
}

}  // namespace

ApiResponse internal::asm_v1(symbolizer::Symbolizer& symbols, simdjson::padded_string_view body) {
  simdjson::dom::parser parser;
  AsmRequest req;
  if (std::string e = parse_request(parser, body, req); !e.empty()) return internal::error_response(400, e);
  auto d = symbols.disassemble(req.debug_name, req.debug_id, req.start, req.size, req.until_function_end);
  if (!d.ok()) return internal::error_response(internal::status_of(d.refusal()), d.refusal().message);
  return write_response(req.start, d.value());
}

ApiResponse asm_v1(symbolizer::Symbolizer& symbols, std::string_view request_json) {
  return internal::asm_v1(symbols, simdjson::padded_string(request_json));
}

}  // namespace fxprof::server
