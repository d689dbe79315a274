// The server's HTTP request parsing (server/http_request.h): whatever any local process sends, token or
// not. The input is a head and what follows it; the body is decoded once whole and once a few bytes at a
// time (as a slow peer sends it), and both must agree.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/http_request.h"

namespace http = fxprof::server::http;

namespace {

struct Decoded {
  http::BodyDecoder::Status status;
  std::string body, rest;
};

Decoded decode(const http::Framing& f, std::string_view bytes, size_t piece) {
  http::BodyDecoder d(f);
  Decoded out{http::BodyDecoder::kMore, {}, {}};
  std::string in;
  size_t at = 0;
  for (; out.status == http::BodyDecoder::kMore && at < bytes.size(); at += piece) {
    in.append(bytes.substr(at, piece));
    out.status = d.feed(in, out.body);
    if (out.body.size() > http::kMaxBody) std::abort();  // the limit holds while receiving
  }
  out.rest = in + std::string(bytes.substr(std::min(at, bytes.size())));  // unread bytes follow what is left
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t piece = 1 + data[0] % 7;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t end = http::head_end(text);
  if (end == std::string_view::npos || end > http::kMaxHead) return 0;
  http::Request req;
  if (!http::parse_head(text.substr(0, end), req)) return 0;
  (void)req.keep_alive();
  http::Framing f = http::framing(req);
  if (f.refuse != 0) return 0;
  if (!f.chunked && f.length > http::kMaxBody) std::abort();
  std::string_view rest = text.substr(end);
  Decoded whole = decode(f, rest, rest.size() + 1);
  Decoded pieces = decode(f, rest, piece);
  if (whole.status != pieces.status || whole.body != pieces.body) std::abort();
  // What is left after a complete body is the next request, byte for byte.
  if (whole.status == http::BodyDecoder::kDone && whole.rest != pieces.rest) std::abort();
  return 0;
}
