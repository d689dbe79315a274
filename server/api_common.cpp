// What the JSON API endpoints share: error bodies, refusal statuses, addresses in requests.
#include "base/json_writer.h"
#include "server/internal.h"

namespace fxprof::server::internal {

ApiResponse error_response(int status, std::string_view message) {
  ApiResponse r;
  r.http_status = status;
  JsonWriter w(r.body);
  w.begin_object().key("error").value(message).end_object();
  return r;
}

int status_of(const symbolizer::Refusal& refusal) {
  switch (refusal.kind) {
    case symbolizer::Refusal::kForbidden:
      return 403;
    case symbolizer::Refusal::kTooLarge:
      return 413;
    case symbolizer::Refusal::kUnsupported:
      return 422;
    case symbolizer::Refusal::kNotFound:
      break;
  }
  return 404;
}

bool parse_address(std::string_view s, uint64_t& v) {
  v = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    int d = c >= '0' && c <= '9'                 ? c - '0'
            : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
            : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
    if (d < 0) return false;
    if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return false;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return true;
}

}  // namespace fxprof::server::internal
