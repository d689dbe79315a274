// The HTTP server's insides, shared by its files (not part of the server's interface): http_server.cpp is the
// transport (connections, the poller, the workers), http_routes.cpp says what each request gets, urls.cpp
// makes the URLs and the token.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "server/http_request.h"
#include "server/server.h"

namespace fxprof::server {

using Clock = std::chrono::steady_clock;

// "127.0.0.1", "[::1]", or for an unspecified address one of this machine's own addresses.
std::string host_for_url(const std::string& address);

struct ProfileServer::Impl {
  static constexpr size_t kWorkers = 8;

  struct Reply {
    int status = 200;
    std::string content_type;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  // A connection, whoever holds it: the poller (reading a head or a body, writing an answer, lingering) or a
  // worker (an API request being answered).
  struct Conn {
    enum Phase { kHead, kBody, kWorker, kWrite, kLinger };
    UniqueFd fd;
    Phase phase = kHead;
    std::string in;              // bytes read and not consumed yet (a head, pipelined requests)
    Clock::time_point since;     // when it started waiting for its current head
    Clock::time_point deadline;  // of the current phase
    bool idle = true;            // kHead with no byte of the next head yet (an idle keep-alive connection)
    http::Request req;
    std::optional<http::BodyDecoder> decoder;
    std::string body;
    size_t body_accounted = 0;       // bytes of `body` counted in body_bytes
    uint64_t reserve = 0;            // a Content-Length body not yet taken from the budget
    unsigned outside = 0;            // requests outside the token answered on this connection
    bool keep = false;               // the connection stays open after this answer
    bool linger = false;             // ... or is lingered on after it (a refused body)
    std::string out_head, out_body;  // the answer being written
    size_t out_sent = 0;
    uint64_t file_off = 0, file_end = 0;  // then the profile's bytes [file_off, file_end)
  };

  symbolizer::Symbolizer* symbols = nullptr;
  UniqueFd profile_fd;
  uint64_t profile_size = 0;
  bool profile_gzip = false;
  std::string token;
  std::string prefix;  // "/<token>/"
  std::string host;
  int port = 0;
  bool nodelay = true;
  std::chrono::milliseconds head_timeout{10000}, body_timeout{30000}, write_timeout{10000};
  size_t max_connections = 1024;

  UniqueFd listen_fd, epoll_fd;
  UniqueFd stop_fd;  // eventfd, written once by stop() and never drained: every wait includes it
  UniqueFd wake_fd;  // eventfd: a worker handed a connection back to the poller
  std::atomic<bool> stopping{false};
  std::atomic<bool> poller_alive{false};
  std::atomic<size_t> busy{0};        // connections held by workers
  std::atomic<size_t> body_bytes{0};  // request bodies held, all connections together
  std::counting_semaphore<kWorkers> big_requests{2};
  std::thread poller;
  std::vector<std::thread> workers;
  std::mutex stop_mutex;
  bool stopped = false;

  std::map<int, std::unique_ptr<Conn>> conns;  // the poller's own
  std::mutex mu;                               // guards ready and returned
  std::condition_variable cv;
  std::deque<std::unique_ptr<Conn>> ready;
  std::vector<std::unique_ptr<Conn>> returned;
  std::string chunk;          // the poller's buffer for reading
  std::vector<int> again;     // connections that used up their turn with work left
  std::vector<int> deferred;  // connections whose body waits for the budget

  bool under_token(const std::string& path) const {
    return path.size() >= prefix.size() && path.compare(0, prefix.size(), prefix) == 0;
  }

  // Transport (http_server.cpp).
  void poll_loop();
  void accept_all();
  void evict_one();
  void on_event(Conn& c);
  void advance(std::unique_ptr<Conn> c);  // runs a poller-held connection as far as its bytes allow
  void step(std::unique_ptr<Conn>& c);
  // step's passes, one per phase: what its loop does next. kHeld: the connection was handed on (to a worker,
  // or to wait for the body budget).
  enum class Next { kAgain, kWait, kClose, kHeld };
  struct Turn {
    size_t moved = 0, answers = 0;  // bytes and answers of this turn of the poller
  };
  Next step_head(Conn& c, Turn& t);
  Next step_body(std::unique_ptr<Conn>& cp, Turn& t);
  Next step_write(Conn& c, Turn& t);
  Next step_linger(Conn& c, Turn& t);
  void start_head(Conn& c);
  void start_write(Conn& c);
  void close(int fd);
  void watch(Conn& c, uint32_t events);
  void worker_loop();
  void release_body(Conn& c);

  // Routes (http_routes.cpp). Both fill c.out_* (and c.keep, c.linger) for the transport to write.
  // A parsed head: answered at once (true), or its body is to be read for an API (false).
  bool answer(Conn& c);
  // An API request whose body was read, on a worker.
  void answer_api(Conn& c);
  // An answer with a canned status for a request that is not read further (bad head, refused body).
  void refuse(Conn& c, int status, bool json);
  void set_reply(Conn& c, Reply r, bool cors, bool head_only = false);
};

}  // namespace fxprof::server
