// What the JSON API endpoints share: error bodies, refusal statuses, addresses in requests.
#include <poll.h>

#include <charconv>

#include "base/hex.h"
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

std::string parse_object(simdjson::dom::parser& parser, simdjson::padded_string_view body,
                         simdjson::dom::element& root) {
  if (body.empty()) return "empty request";
  if (auto e = parser.parse(body).get(root))
    return std::string("malformed JSON request: ") + simdjson::error_message(e);
  if (!root.is_object()) return "malformed request: expected a JSON object";
  return {};
}

bool parse_address(std::string_view s, uint64_t& v) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return parse_hex(s, v);
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;  // from_chars would skip nothing, not fail
  auto r = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

namespace {
thread_local int watched_fd = -1;
}

ClientWatch::ClientWatch(int fd) : previous_(watched_fd) { watched_fd = fd; }
ClientWatch::~ClientWatch() { watched_fd = previous_; }

bool client_gone() {
  if (watched_fd < 0) return false;
  pollfd p{watched_fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace fxprof::server::internal
