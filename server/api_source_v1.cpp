// POST /source/v1: a source file of a library, as the Firefox Profiler's source view asks for it. Which files
// may be served is the symbolizer's rule (only those the debug info names).
#include <algorithm>

#include "base/json_string.h"
#include "base/json_writer.h"
#include "server/internal.h"

namespace fxprof::server {
namespace {

constexpr size_t kMaxAnswerBytes = size_t{32} << 20;
constexpr size_t kChunkBytes = size_t{1} << 20;

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

// The answer, escaped a chunk at a time: NUL bytes grow six-fold as \u0000 (64 MiB of them once made a
// 402 MB answer), so the answer is capped, not only the file, and the work stops when the client has gone.
ApiResponse write_response(std::string_view file, std::string_view text) {
  std::string source = "\"", chunk;
  source.reserve(std::min(text.size() + 2, kMaxAnswerBytes));
  while (!text.empty()) {
    size_t n = std::min(text.size(), kChunkBytes);
    while (n < text.size() && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
    if (n == 0) n = std::min(text.size(), kChunkBytes);  // not UTF-8 anyway: any cut will do
    chunk.clear();
    append_json_string(chunk, text.substr(0, n));
    source.append(chunk, 1, chunk.size() - 2);  // without its quotes
    text.remove_prefix(n);
    if (source.size() > kMaxAnswerBytes)
      return internal::error_response(
          413, "source file too large once escaped as JSON (the answer is limited to 32 MiB): " +
                   std::string(file));
    if (internal::client_gone()) return internal::error_response(499, "the client has gone");
  }
  source += '"';
  ApiResponse r;
  r.body.reserve(source.size() + file.size() + 128);
  JsonWriter w(r.body);
  w.begin_object().key("symbolsLastModified").null().key("sourceLastModified").null();
  w.key("file").value(file).key("source").raw(source).end_object();
  return r;
}

}  // namespace

ApiResponse internal::source_v1(symbolizer::Symbolizer& symbols, simdjson::padded_string_view body) {
  simdjson::dom::parser parser;
  SourceRequest req;
  if (std::string e = parse_request(parser, body, req); !e.empty()) return internal::error_response(400, e);
  if (internal::client_gone()) return internal::error_response(499, "the client has gone");
  auto text = symbols.source(req.debug_name, req.debug_id, req.module_offset, req.file);
  if (!text.ok())
    return internal::error_response(internal::status_of(text.refusal()), text.refusal().message);
  return write_response(req.file, text.value());
}

ApiResponse source_v1(symbolizer::Symbolizer& symbols, std::string_view request_json) {
  return internal::source_v1(symbols, simdjson::padded_string(request_json));
}

}  // namespace fxprof::server
