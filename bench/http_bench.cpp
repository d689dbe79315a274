// Keep-alive request rate of the local server with and without TCP_NODELAY (issue 15), in one run.
// A client sends small /symbolicate/v5 requests one after the other on one connection, the request head and
// body in two writes as browsers and cpp-httplib's client do, and counts answers for a fixed time. The client
// sets TCP_NODELAY itself, as browsers do: without it, its own Nagle delay (the body waits for the head's
// delayed ACK, 40 ms) capped both modes at ~23 requests/s and the benchmark measured the client.
//   fxprof_http_bench [SECONDS_PER_MODE]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/fd.h"
#include "server/server.h"

using namespace fxprof;

namespace {

bool send_all(int fd, std::string_view d) {
  while (!d.empty()) {
    ssize_t n = ::send(fd, d.data(), d.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    d.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool read_answer(int fd, std::string& buf) {
  buf.clear();
  char tmp[4096];
  for (;;) {
    auto end = buf.find("\r\n\r\n");
    if (end != std::string::npos) {
      auto cl = buf.find("Content-Length: ");
      size_t need =
          end + 4 + (cl != std::string::npos ? std::strtoul(buf.c_str() + cl + 16, nullptr, 10) : 0);
      if (buf.size() >= need) return true;
    }
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
  }
}

double rate(bool nodelay, double seconds, const std::string& profile) {
  symbolizer::Symbolizer symbols;
  server::ProfileServer::Config c;
  c.profile_path = profile;
  c.port = 0;
  c.tcp_nodelay = nodelay;
  auto s = server::ProfileServer::start(c, symbols);
  if (!s) {
    std::fprintf(stderr, "%s\n", s.error().c_str());
    std::exit(1);
  }
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>((*s)->port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) std::exit(1);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::string body = R"({"jobs":[{"memoryMap":[],"stacks":[[]]}]})";
  std::string head =
      "POST /" + (*s)->token() +
      "/symbolicate/v5 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n";
  std::string answer;
  long done = 0;
  auto t0 = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{};
  while ((elapsed = std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (!send_all(fd.get(), head) || !send_all(fd.get(), body) || !read_answer(fd.get(), answer))
      std::exit(1);
    ++done;
  }
  return static_cast<double>(done) / elapsed.count();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 3.0;
  char tmpl[] = "/tmp/fxprof-http-bench-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0 || ::write(fd, "{}", 2) != 2) return 1;
  ::close(fd);
  double with = rate(true, seconds, tmpl);
  double without = rate(false, seconds, tmpl);
  ::unlink(tmpl);
  std::printf(
      "keep-alive /symbolicate/v5 on one connection: %.0f req/s with TCP_NODELAY, %.0f req/s without "
      "(ratio %.2f)\n",
      with, without, without > 0 ? with / without : 0.0);
  return 0;
}
