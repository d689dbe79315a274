// fxprof share: one HTTP(S) request, through libcurl (Debian libcurl4-openssl-dev).
//
// Why libcurl and not the tests' cpp-httplib: uploads go to HTTPS services (api.profiler.firefox.com,
// Pyroscope, Parca, presigned S3/GCS URLs) through whatever proxy the user's environment names
// (https_proxy, no_proxy); libcurl does TLS, proxies and redirects as every other tool on the machine does.
// A request either gets a status and a body (capped: these services answer with a token or an error line,
// never megabytes) or fails with one line naming the URL and why.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace fxprof::share {

struct HttpRequest {
  std::string method = "POST";  // POST or PUT
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string_view body;
  // The whole exchange's deadline, in seconds; 0: upload_deadline_s(body.size()).
  long deadline_s = 0;
};

struct HttpResponse {
  long status = 0;
  std::string body;                  // at most kMaxResponseBytes
  std::vector<std::string> headers;  // "name: value" lines of the answer (gRPC-Web's status may be there)
};

inline constexpr size_t kMaxResponseBytes = 1 << 20;

// Sends the request; an answer of any status is a response (the caller decides what is an error). Fails
// only when no answer came (cannot connect, TLS, below 1 KiB/s for 60 s, or past the deadline: a server
// trickling its answer a byte at a time does not hold fxprof). Messages name the URL without its query
// (a presigned URL's signature) or user information.
Result<HttpResponse> send(const HttpRequest& request);

// The total deadline of a request sending `body_bytes`: 2 minutes, plus the time to send the body at
// 64 KiB/s (a 150 MB upload: 40 minutes).
long upload_deadline_s(size_t body_bytes);

// "HTTP 413: <the answer's first line, at most 200 bytes, terminal-safe>": what a service said, for one-line
// errors.
std::string describe_answer(const HttpResponse& response);

}  // namespace fxprof::share
