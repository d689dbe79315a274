// Loopback stand-ins of the services fxprof share and push talk to, and what the tests do with their
// bodies (JWTs, gzip), shared by the share tests.
#pragma once

#include <httplib.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <protozero/pbf_reader.hpp>
#include <string>
#include <thread>
#include <vector>

namespace fxprof::test {

// One captured request.
struct Seen {
  std::string method, path, body, content_type, accept;
  httplib::Params params;
  std::string multipart_profile;
};

// A loopback HTTP server on a free port that records requests and answers with `reply`.
class StandIn {
 public:
  using Reply = std::function<void(const httplib::Request&, httplib::Response&)>;
  // `port` 0: a free one; else that one (a stand-in that comes back where one was before).
  explicit StandIn(Reply reply, int port = 0) : reply_(std::move(reply)) {
    auto handle = [this](const httplib::Request& req, httplib::Response& res) {
      Seen s{req.method,
             req.path,
             req.body,
             req.get_header_value("Content-Type"),
             req.get_header_value("Accept"),
             req.params,
             ""};
      if (req.has_file("profile")) s.multipart_profile = req.get_file_value("profile").content;
      reply_(req, res);
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(std::move(s));
        answered_.push_back(res.status);
      }
      cv_.notify_all();
    };
    server_.Post(R"(/.*)", handle);
    server_.Put(R"(/.*)", handle);
    if (port == 0)
      port_ = server_.bind_to_any_port("127.0.0.1");
    else
      port_ = server_.bind_to_port("127.0.0.1", port) ? port : -1;
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      listened_ = true;
    });
    // bind_to_any_port() already listens: a client connecting before the accept loop runs waits in the
    // backlog.
  }
  ~StandIn() {
    // httplib's stop() does nothing before the accept loop runs, which then never ends: a StandIn dropped
    // at once hung its test until ctest's timeout (2 of 3 runs under load).
    while (!listened_ && !server_.is_running()) std::this_thread::yield();
    server_.stop();
    thread_.join();
  }
  std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  // The statuses answered, in order.
  std::vector<int> answered() {
    std::lock_guard<std::mutex> lock(mu_);
    return answered_;
  }
  // Waits until `n` requests were answered; false on timeout.
  bool wait_for(size_t n, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return seen_.size() >= n; });
  }

 private:
  Reply reply_;
  httplib::Server server_;
  int port_ = 0;
  std::atomic<bool> listened_ = false;  // listen_after_bind() returned (a failed bind returns at once)
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
  std::vector<int> answered_;
};

// One series of a Pyroscope PushRequest (push.v1: series = 1 {labels = 1 {name = 1, value = 2},
// samples = 2 {raw_profile = 1, ID = 2}}) or a Parca WriteRawRequest (series = 2 {labels = 1 (LabelSet
// {labels = 1 {name = 1, value = 2}}), samples = 2 {raw_profile = 1}}).
struct PushedSeries {
  std::map<std::string, std::string> labels;
  std::vector<std::string> raw_profiles;
  std::vector<std::string> ids;
};
inline std::pair<std::string, std::string> decode_label(protozero::pbf_reader label) {
  std::string k, v;
  while (label.next()) {
    const bool is_name = label.tag() == 1;  // read before get_string() moves past the field
    (is_name ? k : v) = label.get_string();
  }
  return {k, v};
}
inline std::vector<PushedSeries> decode_series(const std::string& message, bool parca) {
  std::vector<PushedSeries> out;
  protozero::pbf_reader req(message);
  while (req.next(parca ? 2 : 1)) {
    PushedSeries one;
    protozero::pbf_reader series = req.get_message();
    while (series.next()) {
      if (series.tag() == 1 && parca) {
        protozero::pbf_reader set = series.get_message();
        while (set.next(1)) one.labels.insert(decode_label(set.get_message()));
      } else if (series.tag() == 1) {
        one.labels.insert(decode_label(series.get_message()));
      } else if (series.tag() == 2) {
        protozero::pbf_reader sample = series.get_message();
        while (sample.next()) {
          if (sample.tag() == 1)
            one.raw_profiles.push_back(sample.get_bytes());
          else if (sample.tag() == 2)
            one.ids.push_back(sample.get_string());
          else
            sample.skip();
        }
      } else {
        series.skip();
      }
    }
    out.push_back(std::move(one));
  }
  return out;
}

inline std::string base64url(std::string_view in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += a[(acc >> bits) & 63];
    }
  }
  if (bits) out += a[(acc << (6 - bits)) & 63];
  return out;
}

inline std::string jwt_for(const std::string& token) {
  return base64url(R"({"alg":"HS256","typ":"JWT"})") + "." +
         base64url("{\"profileToken\":\"" + token + "\"}") + ".c2lnbmF0dXJl";
}

inline std::string gunzip(const std::string& in) {
  z_stream z{};
  inflateInit2(&z, 16 + MAX_WBITS);
  std::string out;
  char buf[65536];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  inflateEnd(&z);
  return rc == Z_STREAM_END ? out : "";
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace fxprof::test
