#include "share/http.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "base/terminal.h"

namespace fxprof::share {
namespace {

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

struct Sink {
  std::string* body;
  bool overflow = false;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  if (sink->body->size() + bytes > kMaxResponseBytes) {
    sink->overflow = true;
    return 0;  // aborts the transfer
  }
  sink->body->append(data, bytes);
  return bytes;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::vector<std::string>*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) headers->clear();  // a new answer (after a redirect or 100)
  if (!line.empty() && headers->size() < 200) headers->push_back(std::move(line));
  return size * n;
}

}  // namespace

Result<HttpResponse> send(const HttpRequest& request) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return Err("cannot start an HTTP client (libcurl)");
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add_header = [&](const std::string& h) {
    curl_slist* l = curl_slist_append(headers.get(), h.c_str());
    if (l) {
      (void)headers.release();
      headers.reset(l);
    }
  };
  for (const auto& h : request.headers) add_header(h);
  add_header("Expect:");  // no 100-continue round trip before large bodies
  HttpResponse response;
  Sink sink{&response.body};
  char error[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &response.headers);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled transfer ends; a slow but moving 150 MB upload does not.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  // And a total deadline: a server answering at 2 B/s once held `share` for 464 s.
  const long deadline = request.deadline_s > 0 ? request.deadline_s : upload_deadline_s(request.body.size());
  curl_easy_setopt(c, CURLOPT_TIMEOUT, deadline);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "fxprof/0.1");
  const CURLcode rc = curl_easy_perform(c);
  const std::string url = redact_urls(request.url);
  if (sink.overflow) return Err(url + " answered with more than 1 MiB; is it the right URL?");
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return Err("gave up on " + url + ": no answer within " + std::to_string(deadline) +
               " s, or slower than 1 KiB/s for 60 s");
  if (rc != CURLE_OK)
    return Err("cannot reach " + url + ": " + redact_urls(error[0] ? error : curl_easy_strerror(rc)));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

std::string describe_answer(const HttpResponse& response) {
  std::string line = response.body.substr(0, response.body.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  std::string out = "HTTP " + std::to_string(response.status);
  if (!line.empty()) out += ": " + terminal_safe(line);
  return out;
}

long upload_deadline_s(size_t body_bytes) { return 120 + static_cast<long>(body_bytes / (64 * 1024)); }

}  // namespace fxprof::share
