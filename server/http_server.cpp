// The HTTP side: cpp-httplib routes under the token, CORS, limits, and the profile file as it is on disk.
#include <httplib.h>
#include <simdjson.h>
#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>

#include "base/fd.h"
#include "server/server.h"

namespace fxprof::server {
namespace {

constexpr size_t kMaxBody = size_t{16} << 20;  // a symbolication request for 10k addresses is ~150 KB
constexpr size_t kChunk = 64 * 1024;
constexpr int kLastAutoPort = 3099;
constexpr size_t kWorkers = 16;

// JSON string escaping for our own small error bodies (messages are ASCII we wrote, or simdjson's).
std::string json_error(std::string_view message) {
  std::string out = "{\"error\":\"";
  for (char c : message) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  out += "\"}";
  return out;
}

const char* status_text(int status) {
  switch (status) {
    case 400:
      return "bad request";
    case 404:
      return "not found";
    case 405:
      return "method not allowed";
    case 413:
      return "request body too large (limit 16 MiB)";
    case 500:
      return "internal error";
    default:
      return "request failed";
  }
}

std::string host_for_url(const std::string& address) {
  // An unspecified address is not a place a browser can go; loopback is where the server is reachable.
  if (address == "0.0.0.0" || address.empty()) return "127.0.0.1";
  if (address == "::" || address == "[::]") return "[::1]";
  if (address.find(':') != std::string::npos && address.front() != '[') return "[" + address + "]";
  return address;
}

// httplib listens with a backlog of 5: a burst of connections (the front end's parallel symbolication
// requests, or a test's 100) overflows it and the kernel drops them. Listening again on the bound socket
// raises the backlog (Linux updates it in place).
class HttpServer : public httplib::Server {
 public:
  bool raise_backlog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

}  // namespace

std::string random_token() {
  unsigned char bytes[24];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no entropy source on Linux >= 3.17 is not a state we can serve safely in
    }
    got += static_cast<size_t>(n);
  }
  // 32 symbols that read unambiguously in a URL (nix's choice of dropping e, o, t, u).
  static constexpr char kAlphabet[] = "0123456789abcdfghijklmnpqrsvwxyz";
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += kAlphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kAlphabet[(buffer << (5 - bits)) & 31];
  return out;  // 192 bits -> 39 characters
}

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 2);
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    bool encode = c < 0x20 || c == 0x7f || c == ' ' || c == '%' || c == ':' || c == '/' || c == '?' ||
                  c == '#' || c == '&' || c == '=';
    if (encode) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string firefox_profiler_url(std::string_view profile_url, std::string_view symbol_server) {
  std::string origin = "https://profiler.firefox.com";
  if (const char* env = std::getenv("PROFILER_URL"); env && *env) {
    origin = env;
    while (!origin.empty() && origin.back() == '/') origin.pop_back();
  }
  return origin + "/from-url/" + percent_encode(profile_url) +
         "/?symbolServer=" + percent_encode(symbol_server);
}

struct ProfileServer::Impl {
  symbolizer::Symbolizer* symbols = nullptr;
  std::string profile_path;
  MappedFile profile;
  bool profile_gzip = false;
  std::string token;
  std::string prefix;  // "/<token>/"
  std::string host;
  int port = 0;
  HttpServer http;
  std::thread thread;
  std::mutex stop_mutex;
  bool stopped = false;

  bool under_token(const std::string& path) const {
    return path.size() >= prefix.size() && path.compare(0, prefix.size(), prefix) == 0;
  }

  void set_routes();
  void api(const httplib::Request& req, httplib::Response& res,
           symbolizer::ApiResponse (symbolizer::Symbolizer::*fn)(std::string_view));
};

void ProfileServer::Impl::api(const httplib::Request& req, httplib::Response& res,
                              symbolizer::ApiResponse (symbolizer::Symbolizer::*fn)(std::string_view)) {
  // Malformed JSON is refused here, once, whatever the symbolizer would make of it.
  {
    thread_local simdjson::dom::parser parser;
    simdjson::padded_string body(req.body);
    simdjson::dom::element doc;
    if (auto e = parser.parse(body).get(doc)) {
      res.status = 400;
      res.set_content(json_error(std::string("malformed JSON request: ") + simdjson::error_message(e)),
                      "application/json");
      return;
    }
    if (!doc.is_object()) {
      res.status = 400;
      res.set_content(json_error("malformed request: expected a JSON object"), "application/json");
      return;
    }
  }
  symbolizer::ApiResponse r = (symbols->*fn)(req.body);
  res.status = r.http_status;
  res.set_content(std::move(r.body), "application/json; charset=UTF-8");
}

void ProfileServer::Impl::set_routes() {
  // Before routing (and before a body is read): everything outside the token ends here, and preflights.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!under_token(req.path)) {
      if (req.path == "/" && (req.method == "GET" || req.method == "HEAD")) {
        res.status = 200;
        res.set_content(
            "This is fxprof's local profile server.\n\n"
            "It serves one profile to the Firefox Profiler (https://profiler.firefox.com) under a secret "
            "URL,\n"
            "printed by `fxprof record` or `fxprof load` when it started, together with symbol lookups.\n",
            "text/plain; charset=UTF-8");
      } else {
        res.status = 404;
        res.set_content("Not found.\n", "text/plain; charset=UTF-8");
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "OPTIONS") {
      res.status = 204;
      res.set_header("Allow", "POST, GET, OPTIONS");
      if (req.has_header("Access-Control-Request-Method")) {
        res.set_header("Access-Control-Allow-Methods", "POST, GET, OPTIONS");
        res.set_header("Access-Control-Max-Age", "86400");
      }
      if (req.has_header("Access-Control-Request-Headers")) {
        res.set_header("Access-Control-Allow-Headers",
                       req.get_header_value("Access-Control-Request-Headers"));
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // After every answer (handlers, errors, 413s) under the token: CORS.
  http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (under_token(req.path) && !res.has_header("Access-Control-Allow-Origin")) {
      res.set_header("Access-Control-Allow-Origin", "*");
    }
  });
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!under_token(req.path) || !res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        res.set_content(json_error(status_text(res.status)), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what += std::string(": ") + e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(json_error(what), "application/json");
  });

  http.Get(prefix + "profile\\.json", [this](const httplib::Request&, httplib::Response& res) {
    // Served as it is on disk: a .gz goes out compressed and the browser inflates it.
    if (profile_gzip) res.set_header("Content-Encoding", "gzip");
    std::string_view data = profile.view();
    res.set_content_provider(data.size(), "application/json; charset=UTF-8",
                             [data](size_t offset, size_t length, httplib::DataSink& sink) {
                               size_t n = std::min({length, kChunk, data.size() - offset});
                               return sink.write(data.data() + offset, n);
                             });
  });
  http.Post(prefix + "symbolicate/v5", [this](const httplib::Request& req, httplib::Response& res) {
    api(req, res, &symbolizer::Symbolizer::symbolicate_v5);
  });
  http.Post(prefix + "source/v1", [this](const httplib::Request& req, httplib::Response& res) {
    api(req, res, &symbolizer::Symbolizer::source_v1);
  });
  http.Post(prefix + "asm/v1", [this](const httplib::Request& req, httplib::Response& res) {
    api(req, res, &symbolizer::Symbolizer::asm_v1);
  });
}

ProfileServer::ProfileServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProfileServer::~ProfileServer() { stop(); }

Result<std::unique_ptr<ProfileServer>> ProfileServer::start(const Config& config,
                                                            symbolizer::Symbolizer& symbols) {
  auto impl = std::make_unique<Impl>();
  impl->symbols = &symbols;
  impl->profile_path = config.profile_path;
  auto mapped = map_file(config.profile_path);
  if (!mapped) return Err(mapped.error());
  impl->profile = std::move(*mapped);
  std::string_view head = impl->profile.view();
  impl->profile_gzip = head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
                       static_cast<unsigned char>(head[1]) == 0x8b;
  impl->token = random_token();
  impl->prefix = "/" + impl->token + "/";
  impl->host = host_for_url(config.address);

  HttpServer& http = impl->http;
  // httplib owns the queue it gets from this factory (its API takes a raw pointer).
  http.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
  // httplib's default also sets SO_REUSEPORT, which would let a second server share a busy port (and split
  // the requests between two tokens): only SO_REUSEADDR, so that a busy port is an error or the next one.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_payload_max_length(kMaxBody);
  http.set_keep_alive_timeout(2);
  http.set_keep_alive_max_count(100);
  http.set_read_timeout(10, 0);
  http.set_write_timeout(30, 0);
  impl->set_routes();

  auto bind_error = [&](int port) {
    return "cannot listen on " + config.address + ":" + std::to_string(port) + ": " + errno_text(errno);
  };
  if (config.port == 0) {
    int p = http.bind_to_any_port(config.address);
    if (p <= 0) return Err("cannot listen on " + config.address + ": " + errno_text(errno));
    impl->port = p;
  } else if (config.port_exact) {
    errno = 0;
    if (!http.bind_to_port(config.address, config.port)) {
      return Err(errno == 0 ? "cannot listen on " + config.address + ":" + std::to_string(config.port)
                            : bind_error(config.port));
    }
    impl->port = config.port;
  } else {
    int last = config.port <= kLastAutoPort ? kLastAutoPort : std::min(config.port + 99, 65535);
    for (int p = config.port; p <= last && impl->port == 0; ++p) {
      if (http.bind_to_port(config.address, p)) impl->port = p;
    }
    if (impl->port == 0) {
      return Err("cannot listen on " + config.address + ": ports " + std::to_string(config.port) + " to " +
                 std::to_string(last) + " are all busy or refused (" + errno_text(errno) + ")");
    }
  }

  if (!http.raise_backlog()) return Err("cannot listen on " + config.address + ": " + errno_text(errno));

  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->http.listen_after_bind(); });
  // listen_after_bind() marks the server running first thing; stop() before that would be lost.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!http.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto server = std::make_unique<ProfileServer>(std::move(impl));
  if (!server->impl_->http.is_running()) {
    server->stop();
    return Err("the HTTP server did not start");
  }
  return server;
}

int ProfileServer::port() const { return impl_->port; }
const std::string& ProfileServer::token() const { return impl_->token; }
std::string ProfileServer::origin() const {
  if (const char* env = std::getenv("FXPROF_SERVER_URL"); env && *env) {
    std::string o = env;
    while (!o.empty() && o.back() == '/') o.pop_back();
    return o;
  }
  return "http://" + impl_->host + ":" + std::to_string(impl_->port);
}
std::string ProfileServer::symbol_server_url() const { return origin() + "/" + impl_->token; }
std::string ProfileServer::profile_url() const { return symbol_server_url() + "/profile.json"; }
std::string ProfileServer::profiler_url() const {
  return firefox_profiler_url(profile_url(), symbol_server_url());
}
bool ProfileServer::running() const { return impl_->http.is_running(); }

void ProfileServer::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace fxprof::server
