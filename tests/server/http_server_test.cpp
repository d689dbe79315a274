// The HTTP transport (server/http_server.cpp) under hostile and unlucky clients, over real sockets: bodies
// over the limit in every framing, parallel big requests, slow and idle connections, keep-alive latency,
// files that shrink while served, and the address it prints.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "base/fd.h"
#include "elf/elf.h"
#include "model/profile.h"
#include "server/server.h"
#include "tests/support/support.h"

using namespace fxprof;
using namespace fxprof::test;
using namespace std::chrono_literals;

#if defined(__SANITIZE_ADDRESS__)
#define FXPROF_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FXPROF_TEST_ASAN 1
#endif
#endif
#ifdef FXPROF_TEST_ASAN
#include <sanitizer/allocator_interface.h>
#endif

namespace {

// Under ASan, freed memory waits in its quarantine (256 MB) instead of going back to the system, whatever
// the server does: empty it before measuring what stays resident. Nothing to do otherwise.
void purge_sanitizer_quarantine() {
#ifdef FXPROF_TEST_ASAN
  __sanitizer_purge_allocator();
#endif
}

void write_text(const std::string& path, std::string_view text) {
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
}

// A field of /proc/self/status in KiB (VmRSS, VmHWM).
long status_kib(const std::string& field) {
  auto s = read_file("/proc/self/status");
  REQUIRE(s.ok());
  auto at = s->find(field + ":");
  REQUIRE(at != std::string::npos);
  return std::stol(s->substr(at + field.size() + 1));
}

struct Live {
  symbolizer::Symbolizer symbols;
  std::unique_ptr<server::ProfileServer> server;
  explicit Live(const std::string& profile, server::ProfileServer::Config c = {}) {
    c.profile_path = profile;
    c.port = 0;
    auto s = server::ProfileServer::start(c, symbols);
    REQUIRE(s.ok());
    server = std::move(*s);
  }
  std::string path(const std::string& p) const { return "/" + server->token() + p; }
};

// connect_to() without Catch assertions, for the tests' client threads (Catch2 is not thread-safe): an
// invalid fd on failure.
UniqueFd try_connect(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  return fd;
}

UniqueFd connect_to(int port, int rcvbuf = 0) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  // A fixed receive buffer (no autotuning) for a client that does not read.
  if (rcvbuf > 0) REQUIRE(::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) == 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads one response (head and Content-Length body); "" on EOF or after `timeout`.
// One whole response (head and Content-Length body). Bytes past it (a pipelined next response that arrived in
// the same read) go to `carry`, which the next call for the same connection starts from.
std::string read_response(int fd, std::chrono::milliseconds timeout = 30s, std::string* carry = nullptr) {
  std::string buf = carry ? std::exchange(*carry, std::string()) : std::string();
  auto until = std::chrono::steady_clock::now() + timeout;
  size_t need = std::string::npos;
  char tmp[65536];
  for (;;) {
    if (need == std::string::npos) {
      if (auto end = buf.find("\r\n\r\n"); end != std::string::npos) {
        auto cl = buf.find("Content-Length: ");
        need = end + 4 + (cl != std::string::npos && cl < end ? std::stoul(buf.substr(cl + 16)) : 0);
      }
    }
    if (need != std::string::npos && buf.size() >= need) {
      if (carry) {
        *carry = buf.substr(need);
        buf.resize(need);
      }
      return buf;
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return "";
    buf.append(tmp, static_cast<size_t>(n));
  }
}

// True when the server closes `fd` within `timeout` (EOF or reset), whatever it sent first.
bool closed_within(int fd, std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  char tmp[4096];
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    if (::recv(fd, tmp, sizeof tmp, 0) <= 0) return true;
  }
}

}  // namespace

TEST_CASE("a 300 MiB chunked POST is refused with 413 while it arrives, in bounded memory",
          "[server][http][memory]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{}");
  Live live(dir.file("p.json"));
  long hwm_before = status_kib("VmHWM");
  UniqueFd fd = connect_to(live.server->port());
  REQUIRE(send_all(fd.get(), "POST " + live.path("/symbolicate/v5") +
                                 " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::string chunk = "100000\r\n" + std::string(1 << 20, ' ') + "\r\n";  // 1 MiB
  size_t sent_mib = 0;
  std::string answer;
  for (; sent_mib < 300; ++sent_mib) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) break;  // the server answered
    if (!send_all(fd.get(), chunk)) break;
  }
  answer = read_response(fd.get(), 10s);
  INFO("sent " << sent_mib << " MiB");
  CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 413"));
  CHECK_THAT(answer, Catch::Contains("16 MiB"));
  CHECK(sent_mib < 64);  // the limit, the lingering read and the socket buffers
  CHECK(status_kib("VmHWM") - hwm_before < 64 * 1024);
  // Still serving.
  UniqueFd again = connect_to(live.server->port());
  REQUIRE(send_all(again.get(), "GET " + live.path("/profile.json") + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK_THAT(read_response(again.get()), Catch::StartsWith("HTTP/1.1 200"));
}

TEST_CASE("bodies the server does not take are refused with the right status", "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{}");
  Live live(dir.file("p.json"));
  auto ask = [&](const std::string& head_and_body) {
    UniqueFd fd = connect_to(live.server->port());
    REQUIRE(send_all(fd.get(), head_and_body));
    return read_response(fd.get(), 10s);
  };
  std::string post = "POST " + live.path("/symbolicate/v5") + " HTTP/1.1\r\nHost: x\r\n";
  CHECK_THAT(ask(post + "Content-Length: 999999999999\r\n\r\n"), Catch::StartsWith("HTTP/1.1 413"));
  CHECK_THAT(ask(post + "Transfer-Encoding: gzip\r\n\r\n"), Catch::StartsWith("HTTP/1.1 501"));
  CHECK_THAT(ask(post + "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}"),
             Catch::StartsWith("HTTP/1.1 415"));
  CHECK_THAT(ask(post + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}"),
             Catch::StartsWith("HTTP/1.1 400"));
  CHECK_THAT(ask(post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n"), Catch::StartsWith("HTTP/1.1 400"));
  CHECK_THAT(ask("GET / HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"),
             Catch::StartsWith("HTTP/1.1 431"));
  CHECK_THAT(ask("NONSENSE\r\n\r\n"), Catch::StartsWith("HTTP/1.1 400"));
  // A chunked body within the limit is fine (trailers too), and pipelined requests are answered in order.
  std::string two =
      post + "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"job\r\n7;ext=1\r\ns\":[]}\r\n0\r\nX-T: 1\r\n\r\n" +
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  UniqueFd fd = connect_to(live.server->port());
  REQUIRE(send_all(fd.get(), two));
  std::string carry;  // both answers may arrive in one read
  std::string first = read_response(fd.get(), 30s, &carry);
  CHECK_THAT(first, Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(first, Catch::Contains("\"results\""));
  CHECK_THAT(first, !Catch::Contains("fxprof's local profile server"));
  CHECK_THAT(read_response(fd.get(), 30s, &carry), Catch::Contains("fxprof's local profile server"));
}

TEST_CASE("16 parallel 15 MiB requests leave no big heap behind", "[server][http][memory]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{}");
  Live live(dir.file("p.json"));
  std::string body = R"({"jobs":[],"pad":")" + std::string(15u << 20, 'x') + "\"}";
  std::string request = "POST " + live.path("/symbolicate/v5") +
                        " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\n\r\n" + body;
  body = std::string();
  auto one = [&] {  // on the test's threads: no Catch assertions
    UniqueFd fd = try_connect(live.server->port());
    return fd.valid() && send_all(fd.get(), request) &&
           read_response(fd.get(), 120s).rfind("HTTP/1.1 200", 0) == 0;
  };
  REQUIRE(one());  // one-time costs (code paged in, first allocations) before the baseline
  long rss_before = status_kib("VmRSS");
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&] {
      if (one()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(ok == 16);
  long grown_mib = (status_kib("VmRSS") - rss_before) / 1024;
  INFO("resident after: +" << grown_mib << " MiB");
  CHECK(grown_mib < 100);
}

TEST_CASE("64 slowloris connections do not keep the profile from loading, and the head deadline ends them",
          "[server][http]") {
  TempDir dir;
  std::string profile = "{\"pad\":\"" + std::string(4u << 20, 'p') + "\"}";
  write_text(dir.file("p.json"), profile);
  server::ProfileServer::Config c;
  c.head_timeout = 3s;
  Live live(dir.file("p.json"), c);
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(connect_to(live.server->port()));
    REQUIRE(send_all(slow.back().get(), "GET / HTTP/1.1\r\nHost: x\r\nX-A: "));
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {  // one byte per connection every 200 ms: never a whole head
    while (!done) {
      for (auto& fd : slow) (void)!::send(fd.get(), "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(200ms);
    }
  });
  auto t0 = std::chrono::steady_clock::now();
  UniqueFd fd = connect_to(live.server->port());
  REQUIRE(send_all(fd.get(), "GET " + live.path("/profile.json") + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string r = read_response(fd.get(), 5s);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK_THAT(r, Catch::StartsWith("HTTP/1.1 200"));
  CHECK(r.size() > profile.size());
  CHECK(took < 2s);
  // The deadline closes every one of them (3 s from their first byte), though they keep sending.
  int closed = 0;
  for (auto& s : slow) closed += closed_within(s.get(), 6s) ? 1 : 0;
  done = true;
  trickle.join();
  CHECK(closed == 64);
}

TEST_CASE("keep-alive requests are answered without a Nagle stall (TCP_NODELAY)", "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{}");
  Live live(dir.file("p.json"));
  UniqueFd fd = connect_to(live.server->port());
  std::string req = "POST " + live.path("/symbolicate/v5") +
                    " HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"jobs\":[]}";
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    REQUIRE(send_all(fd.get(), req));
    REQUIRE_THAT(read_response(fd.get(), 5s), Catch::StartsWith("HTTP/1.1 200"));
  }
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  INFO(ms << " ms for 100 requests on one connection");
  CHECK(ms < 2000);  // a 40 ms delayed-ACK stall per request would take 4 s
}

TEST_CASE("a profile truncated while served ends that response, not the server", "[server][http]") {
  TempDir dir;
  std::string profile(8u << 20, 'p');
  write_text(dir.file("p.json"), profile);
  Live live(dir.file("p.json"));
  REQUIRE(::truncate(dir.file("p.json").c_str(), 100) == 0);
  UniqueFd fd = connect_to(live.server->port());
  REQUIRE(send_all(fd.get(), "GET " + live.path("/profile.json") + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(read_response(fd.get(), 10s).empty());  // cut short: the promised length cannot be met
  UniqueFd again = connect_to(live.server->port());
  REQUIRE(send_all(again.get(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK_THAT(read_response(again.get()), Catch::StartsWith("HTTP/1.1 200"));
}

TEST_CASE("a binary overwritten in place while served does not kill the server on /asm/v1",
          "[server][http]") {
  TempDir dir;
  std::string bin = dir.file("fxprof_srv_demo");
  std::filesystem::copy_file(test_program("fxprof_srv_demo"), bin);
  auto nm = run({"nm", "--defined-only", bin});
  REQUIRE(nm.status == 0);
  auto at = nm.out.find(" T compute_hot\n");
  REQUIRE(at != std::string::npos);
  std::string addr = "0x" + nm.out.substr(nm.out.rfind('\n', at) + 1, at - nm.out.rfind('\n', at) - 1);
  auto notes = run({"readelf", "-n", bin});
  auto id_at = notes.out.find("Build ID: ");
  REQUIRE(id_at != std::string::npos);
  std::string build_id_hex = notes.out.substr(id_at + 10, notes.out.find('\n', id_at) - id_at - 10);
  std::vector<uint8_t> build_id;
  for (size_t i = 0; i + 1 < build_id_hex.size(); i += 2)
    build_id.push_back(static_cast<uint8_t>(std::stoul(build_id_hex.substr(i, 2), nullptr, 16)));
  std::string breakpad = fxprof::elf::breakpad_id(build_id);
  write_text(dir.file("p.json"), "{}");
  Live live(dir.file("p.json"));
  live.symbols.add_known_lib(
      {"fxprof_srv_demo", breakpad, "fxprof_srv_demo", bin, bin, build_id_hex, "x86_64"});
  std::string body = R"({"debugName":"fxprof_srv_demo","debugId":")" + breakpad + R"(","startAddress":")" +
                     addr + R"(","size":"0x20"})";
  std::string req = "POST " + live.path("/asm/v1") +
                    " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
                    body;
  auto ask = [&] {
    UniqueFd fd = connect_to(live.server->port());
    REQUIRE(send_all(fd.get(), req));
    return read_response(fd.get(), 30s);
  };
  std::string first = ask();
  REQUIRE_THAT(first, Catch::StartsWith("HTTP/1.1 200"));
  REQUIRE_THAT(first, Catch::Contains("instructions"));
  // `cp new-build app`: the same inode, truncated and rewritten shorter.
  { std::ofstream(bin, std::ios::binary | std::ios::trunc) << "a smaller build"; }
  std::string second = ask();
  CHECK_THAT(second, Catch::StartsWith("HTTP/1.1 "));
  CHECK_THAT(second, !Catch::StartsWith("HTTP/1.1 200"));
  // And symbolication of the same library answers too (its DWARF was read, not mapped).
  std::string sym = R"({"jobs":[{"memoryMap":[["fxprof_srv_demo",")" + breakpad + R"("]],"stacks":[[[0,)" +
                    std::to_string(std::stoull(addr, nullptr, 16)) + "]]]}]}";
  UniqueFd fd = connect_to(live.server->port());
  REQUIRE(send_all(fd.get(), "POST " + live.path("/symbolicate/v5") +
                                 " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(sym.size()) +
                                 "\r\n\r\n" + sym));
  CHECK_THAT(read_response(fd.get()), Catch::StartsWith("HTTP/1.1 200"));
}

TEST_CASE("serving on 0.0.0.0 prints a reachable address and warns about exposure", "[server][cli]") {
  TempDir dir;
  write_text(dir.file("p.json"),
             R"({"meta":{"version":36,"interval":1,"startTime":0,"product":"x","categories":[]},)"
             R"("libs":[],"threads":[],"processes":[]})");
  std::string expected = "127.0.0.1";
  ifaddrs* list = nullptr;
  REQUIRE(getifaddrs(&list) == 0);
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK) ||
        !(a->ifa_flags & IFF_UP))
      continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    expected = buf;
    break;
  }
  freeifaddrs(list);
  Background load({fxprof_bin(), "load", "--no-open", "--address", "0.0.0.0", "-P", "0", dir.file("p.json")});
  std::string line = load.wait_for_line("from-url", 20s);
  INFO(load.err());
  CHECK_THAT(url_decode(line), Catch::Contains("http://" + expected + ":"));
  CHECK_THAT(url_decode(line), !Catch::Contains("0.0.0.0"));
  // stderr: the real address, and one warning line.
  std::string err = load.err();  // written before the URL went to stdout
  CHECK_THAT(err, Catch::Contains("Local server listening at http://" + expected + ":"));
  CHECK_THAT(err, Catch::Contains("Warning: serving on 0.0.0.0: anyone who can reach it"));
  CHECK(load.stop(SIGTERM) == 0);
}

TEST_CASE(
    "clients that pipeline requests and never read the answers hold up nobody, and their answers have "
    "a write deadline",
    "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{\"pad\":\"" + std::string(64 << 10, 'p') + "\"}");
  server::ProfileServer::Config c;
  c.write_timeout = 1s;
  Live live(dir.file("p.json"), c);
  // 16 connections that never read an answer: 8 without the token, each with 16000 requests for the plain
  // page (the server answers 16 of them per connection, then closes it), and 8 with it, each with 2000
  // requests for the 64 KiB profile: far more than the socket buffers hold (8 KiB to receive, at most 4 MiB
  // to send).
  std::string plain, profile;
  for (int i = 0; i < 16000; ++i) plain += "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string one_profile = "GET " + live.path("/profile.json") + " HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < 2000; ++i) profile += one_profile;
  std::vector<UniqueFd> stuck;
  std::vector<size_t> sent;
  for (int i = 0; i < 16; ++i) {
    const std::string& many = i < 8 ? plain : profile;
    stuck.push_back(connect_to(live.server->port(), 8192));
    ssize_t n = ::send(stuck.back().get(), many.data(), many.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    sent.push_back(n > 0 ? static_cast<size_t>(n) / (i < 8 ? 27 : one_profile.size()) : 0);
  }
  // A client with the token gets 100 answers (the profile and an API request, in turn) at once.
  auto t0 = std::chrono::steady_clock::now();
  UniqueFd fd = connect_to(live.server->port());
  int answered = 0;
  for (int i = 0; i < 50; ++i) {
    REQUIRE(send_all(fd.get(), "GET " + live.path("/profile.json") + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    answered += read_response(fd.get(), 10s).rfind("HTTP/1.1 200", 0) == 0;
    REQUIRE(send_all(fd.get(), "POST " + live.path("/symbolicate/v5") +
                                   " HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"jobs\":[]}"));
    answered += read_response(fd.get(), 10s).rfind("HTTP/1.1 200", 0) == 0;
  }
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(answered == 100);
  CHECK(took < 5s);  // 74 answers took 38 s when the stuck connections held the workers
  // After the write deadline (1 s + 1 s per 64 KiB for the profile), each stuck connection has ended before
  // all its answers were written.
  std::this_thread::sleep_for(c.write_timeout + 2s);
  for (size_t i = 0; i < stuck.size(); ++i) {
    std::string all;
    char tmp[65536];
    bool eof = false;
    for (;;) {
      pollfd p{stuck[i].get(), POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) break;
      ssize_t n = ::recv(stuck[i].get(), tmp, sizeof tmp, 0);
      if (n <= 0) {
        eof = true;
        break;
      }
      all.append(tmp, static_cast<size_t>(n));
    }
    size_t answers = 0;
    for (size_t at = 0; (at = all.find("HTTP/1.1 200", at)) != std::string::npos; ++at) ++answers;
    if (i < 8) CHECK(answers == 16);
    INFO("connection " << i << ": " << answers << " answers of " << sent[i] << " requests");
    CHECK(eof);
    CHECK(answers < sent[i]);
  }
}

TEST_CASE("slow request bodies hold up nobody and have a total deadline, and stop() does not wait for them",
          "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{}");
  server::ProfileServer::Config c;
  c.body_timeout = 2s;
  Live live(dir.file("p.json"), c);
  // 16 bodies with the token that arrive a byte every 100 ms (each wait far under any per-read timeout).
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 16; ++i) {
    slow.push_back(connect_to(live.server->port()));
    REQUIRE(send_all(slow.back().get(), "POST " + live.path("/symbolicate/v5") +
                                            " HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"));
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done) {
      for (auto& fd : slow) (void)!::send(fd.get(), " ", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(100ms);
    }
  });
  auto t0 = std::chrono::steady_clock::now();
  UniqueFd fd = connect_to(live.server->port());
  REQUIRE(send_all(fd.get(), "GET " + live.path("/profile.json") + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK_THAT(read_response(fd.get(), 10s), Catch::StartsWith("HTTP/1.1 200"));
  REQUIRE(send_all(fd.get(), "POST " + live.path("/symbolicate/v5") +
                                 " HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"jobs\":[]}"));
  CHECK_THAT(read_response(fd.get(), 10s), Catch::StartsWith("HTTP/1.1 200"));
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);  // 8 such bodies held a GET off for 36 s
  // The body deadline (2 s in all, though bytes keep coming) closes every one of them.
  int closed = 0;
  for (auto& s : slow) closed += closed_within(s.get(), 5s) ? 1 : 0;
  CHECK(closed == 16);
  // New slow bodies and a reader that does not read: stop() returns at once all the same. (The trickle stops
  // first: it sends on these descriptors, which are replaced here; TSan saw the race.)
  done = true;
  trickle.join();
  for (auto& s : slow) {
    s = connect_to(live.server->port());
    REQUIRE(send_all(s.get(), "POST " + live.path("/symbolicate/v5") +
                                  " HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"));
  }
  auto t1 = std::chrono::steady_clock::now();
  live.server->stop();
  CHECK(std::chrono::steady_clock::now() - t1 < 1s);
}

TEST_CASE("two Content-Length or two Transfer-Encoding headers are a 400 and a closed connection",
          "[server][http]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{}");
  Live live(dir.file("p.json"));
  std::string post = "POST " + live.path("/symbolicate/v5") + " HTTP/1.1\r\nHost: x\r\n";
  const std::string next = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";  // must never be answered
  for (const std::string& framing :
       {std::string("Content-Length: 11\r\nContent-Length: 2\r\n"),
        std::string("Content-Length: 2\r\nContent-Length: 11\r\n"),
        std::string("Content-Length: 11\r\ncontent-length: 11\r\n"),
        std::string("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
        std::string("Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n")}) {
    INFO(framing);
    UniqueFd fd = connect_to(live.server->port());
    REQUIRE(send_all(fd.get(), post + framing + "\r\n{\"jobs\":[]}" + next));
    std::string carry;
    CHECK_THAT(read_response(fd.get(), 10s, &carry), Catch::StartsWith("HTTP/1.1 400"));
    CHECK(carry.empty());
    CHECK(read_response(fd.get(), 5s, &carry).empty());  // closed: the next request is not answered
  }
  // The same outside the token, where bodies are never read.
  UniqueFd fd = connect_to(live.server->port());
  REQUIRE(send_all(fd.get(), "GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n" + next));
  std::string carry;
  CHECK_THAT(read_response(fd.get(), 10s, &carry), Catch::StartsWith("HTTP/1.1 400"));
  CHECK(read_response(fd.get(), 5s, &carry).empty());
}

TEST_CASE("the memory of refused bodies is given back", "[server][http][memory]") {
  TempDir dir;
  write_text(dir.file("p.json"), "{}");
  Live live(dir.file("p.json"));
  // 8 chunked bodies of 15 MiB each, all refused at their last bytes (a malformed chunk size).
  std::string request =
      "POST " + live.path("/symbolicate/v5") + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 15; ++i) request += "100000\r\n" + std::string(1 << 20, 'x') + "\r\n";
  request += "zz\r\n";
  auto one = [&] {  // on the test's threads: no Catch assertions
    UniqueFd fd = try_connect(live.server->port());
    return fd.valid() && send_all(fd.get(), request) &&
           read_response(fd.get(), 60s).rfind("HTTP/1.1 400", 0) == 0;
  };
  REQUIRE(one());
  long rss_before = status_kib("VmRSS");
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { refused += one() ? 1 : 0; });
  for (auto& t : threads) t.join();
  CHECK(refused == 8);
  purge_sanitizer_quarantine();
  long grown_mib = (status_kib("VmRSS") - rss_before) / 1024;
  INFO("resident after: +" << grown_mib << " MiB");
  CHECK(grown_mib < 48);
}
