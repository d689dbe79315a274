// Loopback stand-ins of the services fxprof share and push talk to, and what the tests do with their
// bodies (JWTs, gzip), shared by the share tests.
#pragma once

#include <httplib.h>
#include <zlib.h>

#include <fstream>
#include <functional>
#include <mutex>
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
  explicit StandIn(Reply reply) : reply_(std::move(reply)) {
    auto handle = [this](const httplib::Request& req, httplib::Response& res) {
      Seen s{req.method,
             req.path,
             req.body,
             req.get_header_value("Content-Type"),
             req.get_header_value("Accept"),
             req.params,
             ""};
      if (req.has_file("profile")) s.multipart_profile = req.get_file_value("profile").content;
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(std::move(s));
      }
      reply_(req, res);
    };
    server_.Post(R"(/.*)", handle);
    server_.Put(R"(/.*)", handle);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // bind_to_any_port() already listens: a client connecting before the accept loop runs waits in the
    // backlog.
  }
  ~StandIn() {
    server_.stop();
    thread_.join();
  }
  std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  Reply reply_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

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
