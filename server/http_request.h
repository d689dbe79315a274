// fxprof server: parsing HTTP/1.1 requests from bytes as they arrive (the head, then a Content-Length or
// chunked body), with every limit checked while receiving. No I/O: the transport (http_server.cpp) feeds
// what it read; the fuzz harness (fuzz/fuzz_http_requests.cpp) feeds anything.
//
//  - Framing must be unambiguous (request smuggling, and "the first one wins" differing between us and a
//    proxy in front): two Content-Length or two Transfer-Encoding headers, or both kinds, are a 400.
//  - Bodies: at most kMaxBody, counted while receiving for Content-Length and chunked alike; chunk sizes are
//    checked before their bytes are taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fxprof::server::http {

inline constexpr size_t kMaxBody = size_t{16} << 20;
inline constexpr size_t kMaxHead = 16 * 1024;

// Where the head ends (just past the blank line), or npos. Bare LF line ends are accepted too.
size_t head_end(std::string_view buf);

struct Request {
  std::string method, path, version;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  const std::string* header(std::string_view name) const;
  bool keep_alive() const;  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with keep-alive
};

// Parses "METHOD TARGET HTTP/1.x" and the header lines; false for anything malformed, and for ambiguous
// framing (a repeated Content-Length or Transfer-Encoding).
bool parse_head(std::string_view head, Request& req);

// How the body of a parsed request is framed, or why it is refused.
struct Framing {
  int refuse = 0;  // 0, or the status to refuse the body with (400, 413, 415, 501)
  bool chunked = false;
  uint64_t length = 0;  // without chunked
  bool has_body() const { return chunked || length > 0; }
};
Framing framing(const Request& req);

// Decodes a body from bytes as they arrive. feed() consumes what it can from the front of `in` (what is
// left there after kDone belongs to the next request) and appends body bytes to `body`.
class BodyDecoder {
 public:
  enum Status { kMore, kDone, kBad, kTooLarge };
  explicit BodyDecoder(const Framing& f) : chunked_(f.chunked), left_(f.length) {}
  Status feed(std::string& in, std::string& body);

 private:
  enum State { kSize, kData, kDataEnd, kTrailer, kFinished };
  bool chunked_;
  uint64_t left_;  // of the current chunk, or of the whole Content-Length body
  State state_ = kSize;
  int trailers_ = 0;
};

}  // namespace fxprof::server::http
