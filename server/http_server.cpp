// The HTTP side's transport: fxprof's own small HTTP/1.1 server (connections, one poller, API workers).
//
// Why not cpp-httplib's server (Debian's 0.11.4, which we used before): it reads request lines and headers
// with no length cap and no deadline (one byte every 9 s holds a worker forever; 16 such connections, no
// token needed, blocked every real request for 28 s), it checks the 16 MiB body limit only against
// Content-Length (a 300 MiB chunked POST was buffered whole, 1.43 GB peak), a keep-alive connection holds a
// worker thread while idle, and its task queue only sees opaque closures, so none of this can be fixed from
// outside.
//
// Design:
//  - One poller thread (epoll) does all the socket I/O, non-blocking, for every connection: it reads heads
//    (at most 16 KiB, 8x what browsers send) and bodies (http_request.h parses them as they arrive), and
//    writes every answer, the profile's bytes included. Each phase has a total deadline: the head 10 s from
//    its first byte (and an idle keep-alive connection 10 s), the body 30 s, the answer 10 s plus 1 s per
//    64 KiB beyond 640 KiB. A peer that sends or reads slowly costs an fd and a buffer, never a thread: it
//    cannot hold anyone else up, however many there are (pipelined requests from a client that never reads
//    its answers wait in its own socket: the next head is read only once the answer is written). Past 1024
//    connections the oldest waiting one is closed, idle keep-alive connections first.
//  - Requests that are not for an API are answered by the poller itself (routes: http_routes.cpp). An API
//    request, body read, goes to a pool of 8 workers (the front end sends up to 6 requests at a time per
//    host, and one big library can take seconds to symbolicate, so others must not wait behind it); a worker
//    only computes the answer and hands the connection back to the poller to write it.
//  - Bodies are read only under the token: 16 MiB at most each, 128 MiB for all connections together (a
//    Content-Length body waits for its share; a chunked one that finds the budget spent is refused with 503).
//    A refused body gets its answer at once, then a short lingering close (at most 2 s / 32 MiB read and
//    discarded) so that the client sees the answer rather than a reset; the memory of a big refused or
//    answered body is given back to the system (malloc_trim), not kept in an arena.
//  - TCP_NODELAY on every connection, and head + small body in one send: no 40 ms Nagle/delayed-ACK stall on
//    keep-alive requests (bench/http_bench.cpp measures it).
//  - Each request parses its JSON with its own parser, freed when it is answered, at most two requests over
//    1 MiB are parsed at a time (a parse takes ~6x the body): 16 parallel 15 MiB requests peak under 400 MB
//    and leave nothing resident.
//  - The profile is read with pread from the file descriptor opened at start, never mapped: a file truncated
//    or rewritten in place while served ends that response, never the server (SIGBUS).
//  - stop() wakes the poller and every worker through one eventfd and a condition variable: workers never
//    wait on a socket, so it returns within one API answer's computing time, never a timeout.
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "server/http_impl.h"

namespace fxprof::server {
namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr size_t kBodyBudget = size_t{128} << 20;  // request bodies held, all connections together
constexpr int kLingerMs = 2000;                    // reading and discarding after a refused body
constexpr size_t kLingerBytes = size_t{32} << 20;
constexpr uint64_t kMinWriteRate = 64 * 1024;  // bytes per second an answer may take beyond write_timeout
constexpr int kLastAutoPort = 3099;
constexpr size_t kTurnBytes = size_t{1} << 20;  // read or written for one connection per turn of the poller
constexpr size_t kTurnAnswers = 8;
constexpr size_t kPadding = 64;  // simdjson's: the APIs parse the body in place

}  // namespace

void ProfileServer::Impl::watch(Conn& c, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = c.fd.get();
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) != 0)
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, c.fd.get(), &ev);
}

void ProfileServer::Impl::close(int fd) {
  auto it = conns.find(fd);
  if (it == conns.end()) return;
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
  release_body(*it->second);
  conns.erase(it);
}

void ProfileServer::Impl::on_event(Conn& c) {
  // Takes the connection out of the map for advance(), which puts it back (or not).
  auto it = conns.find(c.fd.get());
  std::unique_ptr<Conn> owned = std::move(it->second);
  conns.erase(it);
  advance(std::move(owned));
}

void ProfileServer::Impl::advance(std::unique_ptr<Conn> cp) {
  step(cp);
  if (cp) release_body(*cp);  // closed: its body no longer counts
}

void ProfileServer::Impl::start_write(Conn& c) {
  c.phase = Conn::kWrite;
  uint64_t total = c.out_head.size() + c.out_body.size() + (c.file_end - c.file_off);
  auto extra = std::chrono::seconds(total / kMinWriteRate);
  c.deadline = Clock::now() + write_timeout + std::chrono::duration_cast<std::chrono::milliseconds>(extra);
}

void ProfileServer::Impl::start_head(Conn& c) {
  c.phase = Conn::kHead;
  c.req = http::Request();
  c.decoder.reset();
  c.out_head.clear();
  std::string().swap(c.out_body);
  c.since = Clock::now();
  c.idle = c.in.empty();
  c.deadline = c.since + head_timeout;
  if (c.in.capacity() > http::kMaxHead * 4) c.in.shrink_to_fit();
}

// Runs a connection the poller holds as far as the bytes at hand allow: reads, parses, answers, writes,
// and either waits for the socket again (into `conns`), hands it to a worker (`ready`), or leaves it in
// `cp` to be closed.
void ProfileServer::Impl::step(std::unique_ptr<Conn>& cp) {
  Conn& c = *cp;
  const int fd = c.fd.get();
  // A fair share of the poller per turn: a peer that pipelines requests and reads every answer, or a big
  // profile to a fast reader, continues on the next turn, after everyone else's events.
  Turn t;
  bool yield = false;
  for (;;) {
    if (stopping) return;
    if (t.moved >= kTurnBytes || t.answers >= kTurnAnswers) {
      yield = true;
      break;
    }
    Next next = Next::kClose;  // kWorker: not ours
    switch (c.phase) {
      case Conn::kHead:
        next = step_head(c, t);
        break;
      case Conn::kBody:
        next = step_body(cp, t);
        break;
      case Conn::kWrite:
        next = step_write(c, t);
        break;
      case Conn::kLinger:
        next = step_linger(c, t);
        break;
      case Conn::kWorker:
        break;
    }
    if (next == Next::kAgain) continue;
    if (next == Next::kWait) break;
    return;  // closed or failed (cp closes it), or handed on
  }
  // Waiting for the socket, or for the next turn.
  watch(c, c.phase == Conn::kWrite ? EPOLLOUT : EPOLLIN);
  if (yield) again.push_back(fd);
  conns.emplace(fd, std::move(cp));
}

// Reads a head, then answers it at once or goes on to its body.
ProfileServer::Impl::Next ProfileServer::Impl::step_head(Conn& c, Turn& t) {
  const int fd = c.fd.get();
  size_t end = http::head_end(c.in);
  if (end == std::string::npos && c.in.size() <= http::kMaxHead) {
    ssize_t n = ::recv(fd, chunk.data(), std::min(chunk.size(), http::kMaxHead + 1 - c.in.size()), 0);
    if (n < 0 && errno == EINTR) return Next::kAgain;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Next::kWait;
    if (n <= 0) return Next::kClose;  // closed or failed
    if (c.idle) {
      c.idle = false;
      c.since = Clock::now();  // the head deadline runs from its first byte
      c.deadline = c.since + head_timeout;
    }
    c.in.append(chunk.data(), static_cast<size_t>(n));
    t.moved += static_cast<size_t>(n);
    return Next::kAgain;
  }
  ++t.answers;
  if (end == std::string::npos || end > http::kMaxHead) {
    refuse(c, 431, false);
    start_write(c);
    return Next::kAgain;
  }
  std::string_view head(c.in.data(), end);
  bool parsed = http::parse_head(head, c.req);
  c.in.erase(0, end);
  if (!parsed) {
    refuse(c, 400, false);
    start_write(c);
    return Next::kAgain;
  }
  if (answer(c)) {
    start_write(c);
    return Next::kAgain;
  }
  // An API request: its body, then a worker.
  http::Framing f = http::framing(c.req);
  c.decoder.emplace(f);
  c.phase = Conn::kBody;
  c.deadline = Clock::now() + body_timeout;
  c.reserve = f.chunked ? 0 : f.length;
  if (const std::string* ex = c.req.header("expect"); ex && (*ex == "100-continue" || *ex == "100-Continue"))
    (void)!::send(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL | MSG_DONTWAIT);
  return Next::kAgain;
}

// Reads a body within the budget, then hands the request to a worker (or refuses it).
ProfileServer::Impl::Next ProfileServer::Impl::step_body(std::unique_ptr<Conn>& cp, Turn& t) {
  Conn& c = *cp;
  const int fd = c.fd.get();
  if (c.reserve > 0) {
    // A Content-Length body is taken whole from the budget before its first byte is read; when the budget
    // is spent, the connection waits (its body deadline running) until others give theirs back.
    if (body_bytes + c.reserve > kBodyBudget && body_bytes > 0) {
      ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);  // no events until then (watch() re-adds)
      deferred.push_back(fd);
      conns.emplace(fd, std::move(cp));
      return Next::kHeld;
    }
    c.body.reserve(c.reserve + kPadding);
    c.reserve = 0;
    c.body_accounted = c.body.capacity();
    body_bytes += c.body_accounted;
  }
  auto st = c.decoder->feed(c.in, c.body);
  if (c.body.size() > c.body_accounted) {  // chunked bodies grow as they come
    body_bytes += c.body.size() - c.body_accounted;
    c.body_accounted = c.body.size();
  }
  if (st == http::BodyDecoder::kMore && body_bytes > kBodyBudget) st = http::BodyDecoder::kTooLarge;
  if (st == http::BodyDecoder::kDone) {
    if (c.body.capacity() < c.body.size() + kPadding) c.body.reserve(c.body.size() + kPadding);
    c.phase = Conn::kWorker;
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
    ++busy;
    {
      std::lock_guard lock(mu);
      ready.push_back(std::move(cp));
    }
    cv.notify_one();
    return Next::kHeld;
  }
  if (st != http::BodyDecoder::kMore) {
    int status = st == http::BodyDecoder::kBad ? 400 : body_bytes > kBodyBudget ? 503 : 413;
    release_body(c);
    refuse(c, status, true);
    c.linger = true;
    start_write(c);
    return Next::kAgain;
  }
  ssize_t n = ::recv(fd, chunk.data(), chunk.size(), 0);
  if (n < 0 && errno == EINTR) return Next::kAgain;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Next::kWait;
  if (n <= 0) return Next::kClose;
  c.in.append(chunk.data(), static_cast<size_t>(n));
  t.moved += static_cast<size_t>(n);
  return Next::kAgain;
}

// Writes the answer (the profile's bytes read piece by piece), then lingers, closes or reads the next head.
ProfileServer::Impl::Next ProfileServer::Impl::step_write(Conn& c, Turn& t) {
  const int fd = c.fd.get();
  size_t head_left = c.out_head.size() - std::min(c.out_sent, c.out_head.size());
  size_t body_from = c.out_sent > c.out_head.size() ? c.out_sent - c.out_head.size() : 0;
  size_t body_left = c.out_body.size() - body_from;
  if (head_left == 0 && body_left == 0 && c.file_off < c.file_end) {
    // The next piece of the profile, from the descriptor opened at start.
    size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, c.file_end - c.file_off));
    c.out_body.resize(want);
    ssize_t n = ::pread(profile_fd.get(), c.out_body.data(), want, static_cast<off_t>(c.file_off));
    if (n < 0 && errno == EINTR) return Next::kAgain;
    if (n <= 0)
      return Next::kClose;  // the file shrank under us: end this response (the length cannot be met)
    c.out_body.resize(static_cast<size_t>(n));
    c.file_off += static_cast<uint64_t>(n);
    c.out_head.clear();
    c.out_sent = 0;
    return Next::kAgain;
  }
  if (head_left == 0 && body_left == 0) {  // written
    if (c.linger) {
      ::shutdown(fd, SHUT_WR);
      c.phase = Conn::kLinger;
      c.deadline = Clock::now() + std::chrono::milliseconds(kLingerMs);
      c.out_sent = 0;  // counts the bytes dropped from here on
      c.out_head.clear();
      std::string().swap(c.out_body);
      return Next::kAgain;
    }
    if (!c.keep) return Next::kClose;
    start_head(c);
    return Next::kAgain;
  }
  iovec iov[2] = {{c.out_head.data() + (c.out_head.size() - head_left), head_left},
                  {c.out_body.data() + body_from, body_left}};
  msghdr msg{};
  msg.msg_iov = head_left ? iov : iov + 1;
  msg.msg_iovlen = head_left ? 2 : 1;
  ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && errno == EINTR) return Next::kAgain;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Next::kWait;
  if (n < 0) return Next::kClose;
  c.out_sent += static_cast<size_t>(n);
  t.moved += static_cast<size_t>(n);
  return Next::kAgain;
}

// The client may still be sending the body we refused: read and drop some of it after our answer, so that
// closing does not reset the connection before the client has read the answer.
ProfileServer::Impl::Next ProfileServer::Impl::step_linger(Conn& c, Turn& t) {
  ssize_t n = ::recv(c.fd.get(), chunk.data(), chunk.size(), 0);
  if (n < 0 && errno == EINTR) return Next::kAgain;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Next::kWait;
  if (n <= 0) return Next::kClose;
  c.out_sent += static_cast<size_t>(n);
  t.moved += static_cast<size_t>(n);
  if (c.out_sent >= kLingerBytes) return Next::kClose;
  return Next::kAgain;
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
    answer_api(*c);  // never throws: failures are answers
    c->phase = Conn::kWrite;
    {
      std::lock_guard lock(mu);
      returned.push_back(std::move(c));
    }
    uint64_t one = 1;
    (void)!::write(wake_fd.get(), &one, sizeof one);
    --busy;
  }
}

void ProfileServer::Impl::evict_one() {
  // The oldest idle keep-alive connection, else the oldest one of the others.
  auto victim = conns.end();
  for (auto it = conns.begin(); it != conns.end(); ++it) {
    Conn* v = victim == conns.end() ? nullptr : victim->second.get();
    bool better = v == nullptr || (it->second->idle && !v->idle) ||
                  (it->second->idle == v->idle && it->second->since < v->since);
    if (better) victim = it;
  }
  if (victim != conns.end()) close(victim->first);
}

void ProfileServer::Impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && !conns.empty()) {
        evict_one();
        continue;
      }
      return;  // EAGAIN, or out of descriptors with nothing to give back: the backlog waits
    }
    auto c = std::make_unique<Conn>();
    c->fd = UniqueFd(fd);
    c->since = Clock::now();
    c->deadline = c->since + head_timeout;
    if (nodelay) {
      int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    }
    while (!conns.empty() && conns.size() + busy >= max_connections) evict_one();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;
    conns.emplace(fd, std::move(c));
  }
}

void ProfileServer::Impl::poll_loop() {
  chunk.resize(kChunk);
  epoll_event events[64];
  while (!stopping) {
    int n = ::epoll_wait(epoll_fd.get(), events, 64, again.empty() ? (deferred.empty() ? 100 : 10) : 0);
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
        for (auto& c : back) {  // answered by a worker: write it
          c->deadline = Clock::now() + write_timeout +
                        std::chrono::seconds((c->out_head.size() + c->out_body.size()) / kMinWriteRate);
          advance(std::move(c));
        }
      } else if (auto it = conns.find(fd); it != conns.end()) {
        on_event(*it->second);
      }
    }
    // The connections that had used up their turn, and those waiting for the body budget.
    std::vector<int> next;
    next.swap(again);
    if (!deferred.empty() && body_bytes < kBodyBudget) {
      next.insert(next.end(), deferred.begin(), deferred.end());
      deferred.clear();
    }
    for (int fd : next) {
      if (stopping) break;
      if (auto it = conns.find(fd); it != conns.end()) on_event(*it->second);
    }
    // Every phase's deadline: a head, a body or an answer that takes too long, a linger that is over.
    auto now = Clock::now();
    std::vector<int> late;
    for (auto& [fd, c] : conns)
      if (now > c->deadline) late.push_back(fd);
    for (int fd : late) close(fd);
  }
  conns.clear();
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
  // Buffers of 1 MiB and more (request bodies, their parses, big answers) are mappings of their own, given
  // back to the system when freed. Left to glibc's dynamic threshold, they land in arenas after the first
  // big free, and arenas keep what they had: 8 bodies of 15 MiB left 100+ MB resident.
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(size_t{1} << 20));
  auto impl = std::make_unique<Impl>();
  impl->symbols = &symbols;
  impl->nodelay = config.tcp_nodelay;
  impl->head_timeout = config.head_timeout;
  impl->body_timeout = config.body_timeout;
  impl->write_timeout = config.write_timeout;
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
    impl->max_connections = std::clamp<size_t>(rl.rlim_cur / 2, 16, impl->max_connections);
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
  for (size_t i = 0; i < Impl::kWorkers; ++i) impl->workers.emplace_back([raw] { raw->worker_loop(); });
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
