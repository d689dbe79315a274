// The HTTP side: fxprof's own small HTTP/1.1 server (routes under the token, CORS, limits, the profile file).
//
// Why not cpp-httplib's server (Debian's 0.11.4, which we used before): it reads request lines and headers
// with no length cap and no deadline (one byte every 9 s holds a worker forever; 16 such connections, no
// token needed, blocked every real request for 28 s), it checks the 16 MiB body limit only against
// Content-Length (a 300 MiB chunked POST was buffered whole, 1.43 GB peak), a keep-alive connection holds a
// worker thread while idle, and its task queue only sees opaque closures, so none of this can be fixed from
// outside.
//
// Design:
//  - One poller thread (epoll) owns every connection that is waiting for a request head: new ones and idle
//    keep-alive ones. It reads heads itself (non-blocking, at most 16 KiB, which is 8x what browsers send)
//    and closes a connection whose head is not complete within the head deadline (10 s). Waiting connections
//    cost an fd and a small buffer, no thread: 64 or 1000 slow clients do not delay anyone. Past 1024
//    connections the oldest waiting one is closed, idle keep-alive connections first.
//  - A complete head goes to a pool of 8 workers (the front end sends up to 6 requests at a time per host,
//    and one big library can take seconds to symbolicate, so others must not wait behind it). A worker reads
//    the body (only under the token: outside it a body is never read), answers, and hands the connection
//    back to the poller, or closes it.
//  - Bodies: 16 MiB at most, counted while receiving for Content-Length and chunked alike (a 10k-address
//    symbolication request is ~150 KB); anything else (other transfer or content encodings) is refused.
//    Above the limit: 413 at once, then a short lingering close (at most 2 s / 32 MiB read and discarded)
//    so that the client sees the answer rather than a reset.
//  - TCP_NODELAY on every connection, and head + small body in one send: no 40 ms Nagle/delayed-ACK stall on
//    keep-alive requests (bench/http_bench.cpp measures it).
//  - Each request parses its JSON with its own parser, freed when it is answered, at most two requests over
//    1 MiB are parsed at a time (a parse takes ~6x the body), and big requests trim the heap afterwards:
//    16 parallel 15 MiB requests peak under 400 MB and leave nothing resident (870 MB stayed before).
//  - The profile is read with pread from the file descriptor opened at start, never mapped: a file truncated
//    or rewritten in place while served ends that response, never the server (SIGBUS).
//  - stop() wakes the poller and every worker through one eventfd that all their waits include: it returns
//    within one request's processing time, never a timeout.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <malloc.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <simdjson.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <semaphore>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "server/internal.h"
#include "server/server.h"

namespace fxprof::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxBody = size_t{16} << 20;
constexpr size_t kMaxHead = 16 * 1024;
constexpr size_t kMaxConnections = 1024;
constexpr size_t kWorkers = 8;
constexpr size_t kChunk = 64 * 1024;
constexpr int kIoTimeoutMs = 10000;  // one read or write of a body or response
constexpr int kLingerMs = 2000;      // reading and discarding after a refused body
constexpr size_t kLingerBytes = size_t{32} << 20;
constexpr size_t kTrimAbove = size_t{1} << 20;  // bodies that make the heap worth trimming
constexpr int kLastAutoPort = 3099;

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
    default:
      return "Error";
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Where the head ends (just past the blank line), or npos. Bare LF line ends are accepted too.
size_t head_end(std::string_view buf) {
  for (size_t i = buf.find('\n'); i != std::string_view::npos; i = buf.find('\n', i + 1)) {
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

struct Request {
  std::string method, path, version;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  const std::string* header(std::string_view name) const {
    for (auto& [n, v] : headers)
      if (n == name) return &v;
    return nullptr;
  }
};

// Parses "METHOD TARGET HTTP/1.x" and the header lines; false for anything malformed.
bool parse_head(std::string_view head, Request& req) {
  size_t eol = head.find('\n');
  std::string_view line = trim(head.substr(0, eol));
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return false;
  req.method = std::string(line.substr(0, sp1));
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  req.version = std::string(line.substr(sp2 + 1));
  if (req.method.empty() || target.empty() || target.front() != '/') return false;
  if (req.version != "HTTP/1.1" && req.version != "HTTP/1.0") return false;
  req.path = std::string(target.substr(0, target.find('?')));
  head.remove_prefix(eol + 1);
  while (!head.empty()) {
    eol = head.find('\n');
    std::string_view l = head.substr(0, eol);
    head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 1);
    if (trim(l).empty()) break;
    if (l.front() == ' ' || l.front() == '\t') return false;  // obsolete line folding
    size_t colon = l.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    std::string name = lower(l.substr(0, colon));
    if (name.find_first_of(" \t") != std::string::npos) return false;
    req.headers.emplace_back(std::move(name), std::string(trim(l.substr(colon + 1))));
  }
  return true;
}

std::string host_for_url(const std::string& address) {
  // An unspecified address is not a place a browser can go: name one of this machine's own addresses
  // (the first non-loopback one; loopback when there is none).
  if (address == "0.0.0.0" || address.empty() || address == "::" || address == "[::]") {
    bool v6 = address == "::" || address == "[::]";
    std::string found;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
        if (!a->ifa_addr || (a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP)) continue;
        char buf[INET6_ADDRSTRLEN] = {};
        if (a->ifa_addr->sa_family == AF_INET) {
          inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
          found = buf;
        }
      }
      freeifaddrs(list);
    }
    if (!found.empty()) return found;
    return v6 ? "[::1]" : "127.0.0.1";
  }
  if (address.find(':') != std::string::npos && address.front() != '[') return "[" + address + "]";
  return address;
}

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

std::string firefox_profiler_url(std::string_view profile_url, std::string_view symbol_server,
                                 std::string_view view) {
  std::string origin = "https://profiler.firefox.com";
  if (const char* env = std::getenv("PROFILER_URL"); env && *env) {
    origin = env;
    while (!origin.empty() && origin.back() == '/') origin.pop_back();
  }
  std::string url =
      origin + "/from-url/" + percent_encode(profile_url) + "/?symbolServer=" + percent_encode(symbol_server);
  if (!view.empty()) url.append("&").append(view);
  return url;
}

struct ProfileServer::Impl {
  // A connection and the bytes read from it that are not consumed yet (a head, pipelined requests).
  struct Conn {
    UniqueFd fd;
    std::string buf;
    Clock::time_point since;  // when it started waiting for its current head
    bool idle = true;         // no byte of the next head yet (an idle keep-alive connection)
  };
  struct Reply {
    int status = 200;
    std::string content_type;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  using ApiFn = ApiResponse (*)(symbolizer::Symbolizer&, std::string_view);

  symbolizer::Symbolizer* symbols = nullptr;
  UniqueFd profile_fd;
  uint64_t profile_size = 0;
  bool profile_gzip = false;
  std::string token;
  std::string prefix;  // "/<token>/"
  std::string host;
  int port = 0;
  bool nodelay = true;
  std::chrono::milliseconds head_timeout{10000};
  size_t max_connections = kMaxConnections;

  UniqueFd listen_fd, epoll_fd;
  UniqueFd stop_fd;  // eventfd, written once by stop() and never drained: every wait includes it
  UniqueFd wake_fd;  // eventfd: a worker handed a keep-alive connection back to the poller
  std::atomic<bool> stopping{false};
  std::atomic<bool> poller_alive{false};
  std::atomic<size_t> busy{0};  // connections held by workers
  std::counting_semaphore<kWorkers> big_requests{2};
  std::thread poller;
  std::vector<std::thread> workers;
  std::mutex stop_mutex;
  bool stopped = false;

  std::map<int, std::unique_ptr<Conn>> waiting;  // the poller's own
  std::mutex mu;                                 // guards ready and returned
  std::condition_variable cv;
  std::deque<std::unique_ptr<Conn>> ready;
  std::vector<std::unique_ptr<Conn>> returned;

  bool under_token(const std::string& path) const {
    return path.size() >= prefix.size() && path.compare(0, prefix.size(), prefix) == 0;
  }

  void poll_loop();
  void accept_all();
  void read_head(int fd);
  void dispatch(std::unique_ptr<Conn> c);
  void evict_one();
  void worker_loop();
  bool handle(Conn& c);
  int read_body(Conn& c, const Request& req, std::string& body);
  bool stream_profile(Conn& c, const Reply& head_reply, bool keep, bool head_only);
  Reply api(std::string& body, ApiFn fn);

  // Blocking-with-timeout I/O on a non-blocking socket; false on timeout, error, EOF or stop().
  bool wait_for(int fd, short events, int timeout_ms);
  ssize_t recv_some(Conn& c, char* buf, size_t n);
  bool read_into(Conn& c, std::string& out, size_t n);  // appends the next n bytes
  bool read_line(Conn& c, std::string& line, size_t cap);
  bool send_all(int fd, std::string_view a, std::string_view b = {});
  bool respond(Conn& c, const Reply& r, bool keep, bool cors, bool head_only = false);
  void linger_close(Conn& c);
};

bool ProfileServer::Impl::wait_for(int fd, short events, int timeout_ms) {
  pollfd p[2] = {{fd, events, 0}, {stop_fd.get(), POLLIN, 0}};
  for (;;) {
    int n = ::poll(p, 2, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || p[1].revents) return false;
    return true;  // readable, writable, or an error the next call reports
  }
}

ssize_t ProfileServer::Impl::recv_some(Conn& c, char* buf, size_t n) {
  for (;;) {
    ssize_t got = ::recv(c.fd.get(), buf, n, 0);
    if (got >= 0) return got;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (!wait_for(c.fd.get(), POLLIN, kIoTimeoutMs)) return -1;
  }
}

bool ProfileServer::Impl::read_into(Conn& c, std::string& out, size_t n) {
  // What was read with the head first, then straight into `out`: the body is never copied through c.buf.
  size_t have = std::min(n, c.buf.size());
  out.append(c.buf, 0, have);
  c.buf.erase(0, have);
  n -= have;
  size_t old = out.size();
  out.resize(old + n);
  while (n > 0) {
    ssize_t got = recv_some(c, out.data() + out.size() - n, n);
    if (got <= 0) return false;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool ProfileServer::Impl::read_line(Conn& c, std::string& line, size_t cap) {
  char tmp[512];
  for (;;) {
    if (size_t eol = c.buf.find('\n'); eol != std::string::npos) {
      line.assign(trim(std::string_view(c.buf).substr(0, eol)));
      c.buf.erase(0, eol + 1);
      return true;
    }
    if (c.buf.size() > cap) return false;
    ssize_t n = recv_some(c, tmp, sizeof tmp);
    if (n <= 0) return false;
    c.buf.append(tmp, static_cast<size_t>(n));
  }
}

bool ProfileServer::Impl::send_all(int fd, std::string_view a, std::string_view b) {
  while (!a.empty() || !b.empty()) {
    iovec iov[2] = {{const_cast<char*>(a.data()), a.size()}, {const_cast<char*>(b.data()), b.size()}};
    msghdr msg{};
    msg.msg_iov = a.empty() ? iov + 1 : iov;
    msg.msg_iovlen = a.empty() ? 1 : 2;
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(fd, POLLOUT, kIoTimeoutMs)) continue;
      return false;
    }
    auto sent = static_cast<size_t>(n);
    size_t from_a = std::min(sent, a.size());
    a.remove_prefix(from_a);
    b.remove_prefix(sent - from_a);
  }
  return true;
}

bool ProfileServer::Impl::respond(Conn& c, const Reply& r, bool keep, bool cors, bool head_only) {
  std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  for (auto& [n, v] : r.headers) head += n + ": " + v + "\r\n";
  if (cors) head += "Access-Control-Allow-Origin: *\r\n";
  if (!r.content_type.empty()) head += "Content-Type: " + r.content_type + "\r\n";
  if (r.status != 204) head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  head += keep ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  // One send for head and body: with small answers, nothing waits for an ACK.
  return send_all(c.fd.get(), head, head_only ? std::string_view() : std::string_view(r.body));
}

void ProfileServer::Impl::linger_close(Conn& c) {
  // The client may still be sending the body we refused: read and drop some of it after our answer, so that
  // closing does not reset the connection before the client has read the answer.
  ::shutdown(c.fd.get(), SHUT_WR);
  auto until = Clock::now() + std::chrono::milliseconds(kLingerMs);
  size_t dropped = 0;
  char tmp[kChunk];
  while (dropped < kLingerBytes) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0 || !wait_for(c.fd.get(), POLLIN, static_cast<int>(left))) break;
    ssize_t n = ::recv(c.fd.get(), tmp, sizeof tmp, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
    if (n > 0) dropped += static_cast<size_t>(n);
  }
}

// 0 when `body` holds the whole body, else the status to refuse it with (the connection is then closed).
int ProfileServer::Impl::read_body(Conn& c, const Request& req, std::string& body) {
  const std::string* te = req.header("transfer-encoding");
  const std::string* cl = req.header("content-length");
  if (const std::string* ce = req.header("content-encoding"); ce && lower(*ce) != "identity") return 415;
  uint64_t length = 0;
  if (te) {
    if (cl) return 400;  // both: ambiguous framing
    if (lower(*te) != "chunked") return 501;
  } else if (cl) {
    auto [end, ec] = std::from_chars(cl->data(), cl->data() + cl->size(), length);
    if (ec != std::errc() || end != cl->data() + cl->size()) return 400;
    if (length > kMaxBody) return 413;
  }
  if (const std::string* ex = req.header("expect"); ex && lower(*ex) == "100-continue") {
    if (!send_all(c.fd.get(), "HTTP/1.1 100 Continue\r\n\r\n")) return 400;
  }
  if (!te) {
    body.reserve(length + simdjson::SIMDJSON_PADDING);
    return read_into(c, body, length) ? 0 : 400;
  }
  // Chunked: the limit is checked against each chunk's announced size, before reading it.
  std::string line;
  for (;;) {
    if (!read_line(c, line, 1024)) return 400;
    uint64_t size = 0;
    std::string_view digits = std::string_view(line).substr(0, line.find(';'));
    digits = trim(digits);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return 400;
    if (size == 0) break;
    if (size > kMaxBody - body.size()) return 413;
    if (!read_into(c, body, size)) return 400;
    if (!read_line(c, line, 16) || !line.empty()) return 400;
  }
  for (int trailers = 0;; ++trailers) {  // trailer fields, ignored
    if (trailers > 32 || !read_line(c, line, 4096)) return 400;
    if (line.empty()) break;
  }
  if (body.capacity() < body.size() + simdjson::SIMDJSON_PADDING)
    body.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  return 0;
}

ProfileServer::Impl::Reply ProfileServer::Impl::api(std::string& body, ApiFn fn) {
  Reply r;
  r.content_type = "application/json";
  // Malformed JSON is refused here, once, whatever the symbolizer would make of it. A parser per request:
  // its buffers (about 6x the body) are freed with it.
  {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (auto e = parser.parse(body.data(), body.size(), false).get(doc)) {
      r.status = 400;
      r.body = json_error(std::string("malformed JSON request: ") + simdjson::error_message(e));
      return r;
    }
    if (!doc.is_object()) {
      r.status = 400;
      r.body = json_error("malformed request: expected a JSON object");
      return r;
    }
  }
  ApiResponse a = fn(*symbols, body);
  r.status = a.http_status;
  r.body = std::move(a.body);
  r.content_type = "application/json; charset=UTF-8";
  return r;
}

bool ProfileServer::Impl::stream_profile(Conn& c, const Reply& head_reply, bool keep, bool head_only) {
  Reply r = head_reply;
  r.body.clear();
  std::string head = "HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: *\r\n";
  // Served as it is on disk: a .gz goes out compressed and the browser inflates it.
  if (profile_gzip) head += "Content-Encoding: gzip\r\n";
  head += "Content-Type: application/json; charset=UTF-8\r\nContent-Length: " + std::to_string(profile_size) +
          (keep ? "\r\nConnection: keep-alive\r\n\r\n" : "\r\nConnection: close\r\n\r\n");
  if (!send_all(c.fd.get(), head)) return false;
  if (head_only) return keep;
  std::string buf(kChunk, '\0');
  for (uint64_t off = 0; off < profile_size;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, profile_size - off));
    ssize_t n = ::pread(profile_fd.get(), buf.data(), want, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // the file shrank under us: end this response (the length cannot be met)
    if (!send_all(c.fd.get(), std::string_view(buf.data(), static_cast<size_t>(n)))) return false;
    off += static_cast<uint64_t>(n);
  }
  return keep;
}

// Answers one request whose head is in c.buf; true when the connection stays open for the next one.
bool ProfileServer::Impl::handle(Conn& c) {
  size_t end = head_end(c.buf);
  std::string head = c.buf.substr(0, end);
  c.buf.erase(0, end);
  Request req;
  Reply r;
  if (!parse_head(head, req)) {
    r.status = 400;
    r.content_type = "text/plain; charset=UTF-8";
    r.body = "Bad request.\n";
    respond(c, r, false, false);
    return false;
  }
  auto has_token = [&](const std::string* v, std::string_view t) {
    return v && lower(*v).find(t) != std::string::npos;
  };
  const std::string* connection = req.header("connection");
  bool keep =
      req.version == "HTTP/1.1" ? !has_token(connection, "close") : has_token(connection, "keep-alive");
  const std::string* cl = req.header("content-length");
  bool has_body = req.header("transfer-encoding") || (cl && *cl != "0");
  bool get = req.method == "GET" || req.method == "HEAD";

  if (!under_token(req.path)) {
    // Nothing outside the token reads a body or says more than this.
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
    keep = keep && !has_body;
    return respond(c, r, keep, false, req.method == "HEAD") && keep;
  }

  auto error = [&](int status, std::string_view message) {
    r.status = status;
    r.content_type = "application/json";
    r.body = json_error(message);
  };
  if (req.method == "OPTIONS") {
    r.status = 204;
    r.headers.emplace_back("Allow", "POST, GET, OPTIONS");
    if (req.header("access-control-request-method")) {
      r.headers.emplace_back("Access-Control-Allow-Methods", "POST, GET, OPTIONS");
      r.headers.emplace_back("Access-Control-Max-Age", "86400");
    }
    if (const std::string* h = req.header("access-control-request-headers"))
      r.headers.emplace_back("Access-Control-Allow-Headers", *h);
    keep = keep && !has_body;
    return respond(c, r, keep, true) && keep;
  }
  std::string_view route = std::string_view(req.path).substr(prefix.size());
  ApiFn fn = route == "symbolicate/v5" ? &symbolicate_v5
             : route == "source/v1"    ? &source_v1
             : route == "asm/v1"       ? &asm_v1
                                       : nullptr;
  if (route == "profile.json" && get && !has_body) return stream_profile(c, r, keep, req.method == "HEAD");
  if (fn && req.method == "POST") {
    std::string body;
    if (int refused = read_body(c, req, body)) {
      error(refused, refused == 413   ? "request body too large (limit 16 MiB)"
                     : refused == 415 ? "compressed request bodies are not supported"
                     : refused == 501 ? "unsupported transfer encoding"
                                      : "bad request");
      if (respond(c, r, false, true)) linger_close(c);
      return false;
    }
    bool big = body.capacity() > kTrimAbove;
    if (big) big_requests.acquire();  // a parse takes ~6x the body: at most two big ones at a time
    r = api(body, fn);
    if (big) big_requests.release();
    body = std::string();
    bool ok = respond(c, r, keep, true);
    if (big) {
      r = Reply();
      malloc_trim(0);  // big requests' buffers go back to the system, not into an arena's free lists
    }
    return ok && keep;
  }
  if (route == "profile.json" || fn) {
    error(405, "method not allowed");
  } else {
    error(404, "not found");
  }
  keep = keep && !has_body;
  return respond(c, r, keep, true) && keep;
}

void ProfileServer::Impl::worker_loop() {
  for (;;) {
    std::unique_ptr<Conn> c;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stopping || !ready.empty(); });
      if (stopping) return;
      c = std::move(ready.front());
      ready.pop_front();
    }
    bool keep = false;
    try {
      keep = handle(*c);
    } catch (const std::exception& e) {  // bad_alloc from a huge answer: this request fails, not the server
      Reply r;
      r.status = 500;
      r.content_type = "application/json";
      r.body = json_error(std::string("internal error: ") + e.what());
      respond(*c, r, false, true);
    }
    if (keep && !stopping) {
      if (c->buf.capacity() > kMaxHead * 4) c->buf.shrink_to_fit();
      c->since = Clock::now();
      c->idle = c->buf.empty();
      std::lock_guard lock(mu);
      returned.push_back(std::move(c));
      uint64_t one = 1;
      (void)!::write(wake_fd.get(), &one, sizeof one);
    }
    --busy;
  }
}

void ProfileServer::Impl::dispatch(std::unique_ptr<Conn> c) {
  ++busy;
  {
    std::lock_guard lock(mu);
    ready.push_back(std::move(c));
  }
  cv.notify_one();
}

void ProfileServer::Impl::evict_one() {
  // The oldest idle keep-alive connection, else the oldest one still sending its head.
  auto victim = waiting.end();
  for (auto it = waiting.begin(); it != waiting.end(); ++it) {
    Conn* v = victim == waiting.end() ? nullptr : victim->second.get();
    bool better = v == nullptr || (it->second->idle && !v->idle) ||
                  (it->second->idle == v->idle && it->second->since < v->since);
    if (better) victim = it;
  }
  if (victim != waiting.end()) {
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, victim->first, nullptr);
    waiting.erase(victim);
  }
}

void ProfileServer::Impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && !waiting.empty()) {
        evict_one();
        continue;
      }
      return;  // EAGAIN, or out of descriptors with nothing to give back: the backlog waits
    }
    auto c = std::make_unique<Conn>();
    c->fd = UniqueFd(fd);
    c->since = Clock::now();
    if (nodelay) {
      int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    }
    while (!waiting.empty() && waiting.size() + busy >= max_connections) evict_one();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;
    waiting.emplace(fd, std::move(c));
  }
}

void ProfileServer::Impl::read_head(int fd) {
  auto it = waiting.find(fd);
  if (it == waiting.end()) return;
  Conn& c = *it->second;
  char tmp[4096];
  for (;;) {
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // closed or failed
      ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
      waiting.erase(it);
      return;
    }
    if (c.idle) {
      c.idle = false;
      c.since = Clock::now();  // the head deadline runs from its first byte
    }
    c.buf.append(tmp, static_cast<size_t>(n));
    size_t end = head_end(c.buf);
    if (end != std::string::npos && end <= kMaxHead) break;
    if (c.buf.size() > kMaxHead) {
      static constexpr std::string_view k431 =
          "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      (void)!::send(fd, k431.data(), k431.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
      waiting.erase(it);
      return;
    }
  }
  if (head_end(c.buf) != std::string::npos) {
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
    std::unique_ptr<Conn> owned = std::move(it->second);
    waiting.erase(it);
    dispatch(std::move(owned));
  }
}

void ProfileServer::Impl::poll_loop() {
  epoll_event events[64];
  while (!stopping) {
    int n = ::epoll_wait(epoll_fd.get(), events, 64, 100);
    for (int i = 0; i < n && !stopping; ++i) {
      int fd = events[i].data.fd;
      if (fd == stop_fd.get()) break;
      if (fd == listen_fd.get()) {
        accept_all();
      } else if (fd == wake_fd.get()) {
        uint64_t count;
        (void)!::read(wake_fd.get(), &count, sizeof count);
        std::vector<std::unique_ptr<Conn>> back;
        {
          std::lock_guard lock(mu);
          back.swap(returned);
        }
        for (auto& c : back) {
          if (head_end(c->buf) != std::string::npos) {  // a pipelined request already read
            dispatch(std::move(c));
            continue;
          }
          int cfd = c->fd.get();
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = cfd;
          if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, cfd, &ev) == 0) waiting.emplace(cfd, std::move(c));
        }
      } else {
        read_head(fd);
      }
    }
    // The head deadline (and the idle keep-alive timeout): whoever has not sent a whole head in time goes.
    auto now = Clock::now();
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (now - it->second->since > head_timeout) {
        ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, it->first, nullptr);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
  }
  waiting.clear();
  poller_alive = false;
}

namespace {

// A listening socket on address:port (0: the OS picks); -1 with errno set on failure.
UniqueFd listen_on(const std::string& address, int port) {
  std::string host = address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    errno = EADDRNOTAVAIL;
    return UniqueFd();
  }
  int saved = 0;
  UniqueFd out;
  for (addrinfo* a = res; a && !out.valid(); a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      saved = errno;
      continue;
    }
    // SO_REUSEADDR only (no SO_REUSEPORT, which would let a second server share a busy port and split the
    // requests between two tokens): a busy port is an error or the next one.
    int yes = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      saved = errno;
      continue;
    }
    out = std::move(fd);
  }
  ::freeaddrinfo(res);
  if (!out.valid()) errno = saved;
  return out;
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace

ProfileServer::ProfileServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProfileServer::~ProfileServer() { stop(); }

Result<std::unique_ptr<ProfileServer>> ProfileServer::start(const Config& config,
                                                            symbolizer::Symbolizer& symbols) {
  auto impl = std::make_unique<Impl>();
  impl->symbols = &symbols;
  impl->nodelay = config.tcp_nodelay;
  impl->head_timeout = config.head_timeout;
  impl->profile_fd = UniqueFd(::open(config.profile_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!impl->profile_fd.valid()) return Err("cannot open " + config.profile_path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(impl->profile_fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Err(config.profile_path + " is not a regular file");
  impl->profile_size = static_cast<uint64_t>(st.st_size);
  unsigned char magic[2] = {};
  impl->profile_gzip =
      ::pread(impl->profile_fd.get(), magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  impl->token = random_token();
  impl->prefix = "/" + impl->token + "/";
  impl->host = host_for_url(config.address);
  // Each connection is a descriptor: keep well under the process's limit (the symbolizer opens files too).
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 8192);
      ::setrlimit(RLIMIT_NOFILE, &rl);
      ::getrlimit(RLIMIT_NOFILE, &rl);
    }
    impl->max_connections = std::clamp<size_t>(rl.rlim_cur / 2, 16, kMaxConnections);
  }

  auto bind_error = [&](int port) {
    return "cannot listen on " + config.address + ":" + std::to_string(port) + ": " + errno_text(errno);
  };
  if (config.port == 0) {
    impl->listen_fd = listen_on(config.address, 0);
    if (!impl->listen_fd.valid()) return Err("cannot listen on " + config.address + ": " + errno_text(errno));
  } else if (config.port_exact) {
    impl->listen_fd = listen_on(config.address, config.port);
    if (!impl->listen_fd.valid()) return Err(bind_error(config.port));
  } else {
    int last = config.port <= kLastAutoPort ? kLastAutoPort : std::min(config.port + 99, 65535);
    for (int p = config.port; p <= last && !impl->listen_fd.valid(); ++p)
      impl->listen_fd = listen_on(config.address, p);
    if (!impl->listen_fd.valid()) {
      return Err("cannot listen on " + config.address + ": ports " + std::to_string(config.port) + " to " +
                 std::to_string(last) + " are all busy or refused (" + errno_text(errno) + ")");
    }
  }
  impl->port = bound_port(impl->listen_fd.get());

  impl->epoll_fd = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  impl->stop_fd = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  impl->wake_fd = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->epoll_fd.valid() || !impl->stop_fd.valid() || !impl->wake_fd.valid())
    return Err("cannot start the HTTP server: " + errno_text(errno));
  for (int fd : {impl->listen_fd.get(), impl->stop_fd.get(), impl->wake_fd.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(impl->epoll_fd.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      return Err("cannot start the HTTP server: " + errno_text(errno));
  }

  Impl* raw = impl.get();
  // Listening already: connections made from now on wait in the backlog until the poller takes them.
  impl->poller_alive = true;
  impl->poller = std::thread([raw] { raw->poll_loop(); });
  for (size_t i = 0; i < kWorkers; ++i) impl->workers.emplace_back([raw] { raw->worker_loop(); });
  return std::make_unique<ProfileServer>(std::move(impl));
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
bool ProfileServer::running() const { return impl_->poller_alive; }

void ProfileServer::stop() {
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  {
    std::lock_guard q(impl_->mu);
    impl_->stopping = true;
  }
  uint64_t one = 1;
  (void)!::write(impl_->stop_fd.get(), &one, sizeof one);
  impl_->cv.notify_all();
  if (impl_->poller.joinable()) impl_->poller.join();
  for (auto& w : impl_->workers)
    if (w.joinable()) w.join();
  impl_->workers.clear();
  impl_->ready.clear();
  impl_->returned.clear();
  impl_->listen_fd.reset();
}

}  // namespace fxprof::server
