// What each request gets: the routes under the token (the profile, the JSON APIs, CORS preflights), the
// plain page at /, 404 elsewhere. Only API requests reach a worker; everything else is answered by the
// poller as soon as its head is parsed (nothing outside the token reads a body or says more than this).
#include <malloc.h>
#include <simdjson.h>

#include "server/http_impl.h"
#include "server/internal.h"

namespace fxprof::server {
namespace {

constexpr size_t kTrimAbove = size_t{1} << 20;  // bodies that make the heap worth trimming
constexpr unsigned kMaxOutsideRequests = 16;    // per connection, outside the token

using ApiFn = internal::Endpoint;

// Each endpoint parses its body itself, once, into its typed request (malformed JSON included).
ApiFn api_of(std::string_view route) {
  return route == "symbolicate/v5" ? &internal::symbolicate_v5
         : route == "source/v1"    ? &internal::source_v1
         : route == "asm/v1"       ? &internal::asm_v1
                                   : nullptr;
}

// {"error":"..."} for our own error bodies, as the APIs write theirs.
std::string json_error(std::string_view message) { return internal::error_response(400, message).body; }

const char* reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

const char* refusal_text(int status) {
  switch (status) {
    case 413:
      return "request body too large (limit 16 MiB)";
    case 415:
      return "compressed request bodies are not supported";
    case 501:
      return "unsupported transfer encoding";
    case 503:
      return "too many request bodies at once: try again";
    default:
      return "bad request";
  }
}

}  // namespace

void ProfileServer::Impl::set_reply(Conn& c, Reply r, bool cors, bool head_only) {
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  for (auto& [n, v] : r.headers) head += n + ": " + v + "\r\n";
  if (cors) head += "Access-Control-Allow-Origin: *\r\n";
  if (!r.content_type.empty()) head += "Content-Type: " + r.content_type + "\r\n";
  if (r.status != 204) head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  head += c.keep ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  c.out_head = std::move(head);
  std::string().swap(c.out_body);
  if (!head_only) c.out_body.swap(r.body);
  c.out_sent = 0;
  c.file_off = c.file_end = 0;
}

void ProfileServer::Impl::refuse(Conn& c, int status, bool json) {
  Reply r;
  r.status = status;
  if (json) {
    r.content_type = "application/json";
    r.body = json_error(refusal_text(status));
  } else {
    r.content_type = "text/plain; charset=UTF-8";
    r.body = status == 431 ? "Request head too large.\n" : "Bad request.\n";
  }
  c.keep = false;
  set_reply(c, std::move(r), json);
}

bool ProfileServer::Impl::answer(Conn& c) {
  const http::Request& req = c.req;
  http::Framing f = http::framing(req);
  bool has_body = f.has_body() || f.refuse != 0;
  bool get = req.method == "GET" || req.method == "HEAD";
  bool head_only = req.method == "HEAD";
  c.keep = req.keep_alive() && !has_body;  // a body we do not read ends the connection
  Reply r;
  if (!under_token(req.path)) {
    // A browser asks for / or a favicon once in a while; a peer that pipelines thousands of such requests
    // only wants the poller's time: it gets 16 answers per connection. The last is followed by a lingering
    // close: a close with its unread requests would reset the connection and drop answers not yet sent.
    if (++c.outside >= kMaxOutsideRequests) {
      c.keep = false;
      c.linger = true;
    }
    if (req.path == "/" && get) {
      r.content_type = "text/plain; charset=UTF-8";
      r.body =
          "This is fxprof's local profile server.\n\n"
          "It serves one profile to the Firefox Profiler (https://profiler.firefox.com) under a secret URL,\n"
          "printed by `fxprof record` or `fxprof load` when it started, together with symbol lookups.\n";
    } else {
      r.status = 404;
      r.content_type = "text/plain; charset=UTF-8";
      r.body = "Not found.\n";
    }
    set_reply(c, std::move(r), false, head_only);
    return true;
  }
  std::string_view route = std::string_view(req.path).substr(prefix.size());
  ApiFn fn = api_of(route);
  if (fn && req.method == "POST") {
    if (f.refuse) {
      refuse(c, f.refuse, true);
      c.linger = true;
      return true;
    }
    c.keep = req.keep_alive();
    return false;  // the transport reads the body, then a worker calls answer_api
  }
  if (req.method == "OPTIONS") {
    r.status = 204;
    r.headers.emplace_back("Allow", "POST, GET, OPTIONS");
    if (req.header("access-control-request-method")) {
      r.headers.emplace_back("Access-Control-Allow-Methods", "POST, GET, OPTIONS");
      r.headers.emplace_back("Access-Control-Max-Age", "86400");
    }
    if (const std::string* h = req.header("access-control-request-headers"))
      r.headers.emplace_back("Access-Control-Allow-Headers", *h);
  } else if (route == "profile.json" && get && !has_body) {
    // Served as it is on disk: a .gz goes out compressed and the browser inflates it. The transport
    // streams the bytes from the descriptor opened at start (pread: a file truncated meanwhile ends the
    // response, never the server).
    std::string head = "HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: *\r\n";
    if (profile_gzip) head += "Content-Encoding: gzip\r\n";
    head +=
        "Content-Type: application/json; charset=UTF-8\r\nContent-Length: " + std::to_string(profile_size) +
        (c.keep ? "\r\nConnection: keep-alive\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
    c.out_head = std::move(head);
    c.out_body.clear();
    c.out_sent = 0;
    c.file_off = 0;
    c.file_end = head_only ? 0 : profile_size;
    return true;
  } else {
    r.status = route == "profile.json" || fn ? 405 : 404;
    r.content_type = "application/json";
    r.body = json_error(r.status == 405 ? "method not allowed" : "not found");
  }
  set_reply(c, std::move(r), true);
  return true;
}

void ProfileServer::Impl::answer_api(Conn& c) {
  ApiFn fn = api_of(std::string_view(c.req.path).substr(prefix.size()));
  Reply r;
  r.content_type = "application/json";
  bool big = c.body.capacity() > kTrimAbove;
  try {
    if (big) big_requests.acquire();  // a parse takes ~6x the body: at most two big ones at a time
    internal::ClientWatch watch(c.fd.get());
    // The transport reserved simdjson's padding past the body: the endpoint parses it in place.
    ApiResponse a =
        fn(*symbols, simdjson::padded_string_view(c.body.data(), c.body.size(), c.body.capacity()));
    r.status = a.http_status;
    r.body = std::move(a.body);
    r.content_type = "application/json; charset=UTF-8";
  } catch (const std::exception& e) {  // bad_alloc from a huge answer: this request fails, not the server
    r = Reply();
    r.status = 500;
    r.content_type = "application/json";
    r.body = json_error(std::string("internal error: ") + e.what());
    c.keep = false;
  }
  if (big) big_requests.release();
  release_body(c);
  set_reply(c, std::move(r), true);
}

void ProfileServer::Impl::release_body(Conn& c) {
  bool big = c.body.capacity() > kTrimAbove;
  std::string().swap(c.body);  // not `= std::string()`: libstdc++ keeps the buffer when moving in a short one
  body_bytes -= c.body_accounted;
  c.body_accounted = 0;
  // Big requests' buffers go back to the system, not into an arena's free lists (refused ones too).
  if (big) malloc_trim(0);
}

}  // namespace fxprof::server
