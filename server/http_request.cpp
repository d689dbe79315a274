// HTTP/1.1 request parsing: heads, framing, bodies (http_request.h).
#include "server/http_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace fxprof::server::http {
namespace {

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

bool has_token(const std::string* v, std::string_view t) {
  return v && lower(*v).find(t) != std::string::npos;
}

}  // namespace

size_t head_end(std::string_view buf) {
  for (size_t i = buf.find('\n'); i != std::string_view::npos; i = buf.find('\n', i + 1)) {
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

const std::string* Request::header(std::string_view name) const {
  for (auto& [n, v] : headers)
    if (n == name) return &v;
  return nullptr;
}

bool Request::keep_alive() const {
  const std::string* connection = header("connection");
  return version == "HTTP/1.1" ? !has_token(connection, "close") : has_token(connection, "keep-alive");
}

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
  if (eol == std::string_view::npos) return true;
  head.remove_prefix(eol + 1);
  int lengths = 0, encodings = 0;
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
    lengths += name == "content-length";
    encodings += name == "transfer-encoding";
    req.headers.emplace_back(std::move(name), std::string(trim(l.substr(colon + 1))));
  }
  return lengths <= 1 && encodings <= 1;  // a repeated framing header is ambiguous, even when equal
}

Framing framing(const Request& req) {
  Framing f;
  const std::string* te = req.header("transfer-encoding");
  const std::string* cl = req.header("content-length");
  if (const std::string* ce = req.header("content-encoding"); ce && lower(*ce) != "identity") {
    f.refuse = 415;
  } else if (te) {
    f.refuse = cl ? 400 : lower(*te) != "chunked" ? 501 : 0;  // both: ambiguous framing
    f.chunked = true;
  } else if (cl) {
    auto [end, ec] = std::from_chars(cl->data(), cl->data() + cl->size(), f.length);
    if (cl->empty() || ec != std::errc() || end != cl->data() + cl->size())
      f.refuse = 400;
    else if (f.length > kMaxBody)
      f.refuse = 413;
  }
  return f;
}

BodyDecoder::Status BodyDecoder::feed(std::string& in, std::string& body) {
  size_t pos = 0;
  auto take_line = [&](std::string_view& line, size_t cap) -> int {  // 1 got, 0 need more, -1 too long
    size_t eol = in.find('\n', pos);
    if (eol == std::string::npos) return in.size() - pos > cap ? -1 : 0;
    if (eol - pos > cap) return -1;
    line = trim(std::string_view(in).substr(pos, eol - pos));
    pos = eol + 1;
    return 1;
  };
  Status status = kMore;
  while (status == kMore) {
    if (!chunked_ || state_ == kData) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(left_, in.size() - pos));
      body.append(in, pos, n);
      pos += n;
      left_ -= n;
      if (left_ > 0) break;
      if (!chunked_) status = kDone;
      state_ = kDataEnd;
      continue;
    }
    std::string_view line;
    int got = take_line(line, state_ == kTrailer ? 4096 : state_ == kSize ? 1024 : 16);
    if (got < 0) status = kBad;
    if (got <= 0) break;
    if (state_ == kSize) {
      std::string_view digits = trim(line.substr(0, line.find(';')));
      uint64_t size = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
        status = kBad;
      } else if (size > kMaxBody - body.size()) {
        status = kTooLarge;
      } else {
        left_ = size;
        state_ = size == 0 ? kTrailer : kData;
      }
    } else if (state_ == kDataEnd) {
      if (line.empty())
        state_ = kSize;
      else
        status = kBad;
    } else if (line.empty()) {  // the end of the trailer fields (ignored)
      state_ = kFinished;
      status = kDone;
    } else if (++trailers_ > 32) {
      status = kBad;
    }
  }
  in.erase(0, pos);
  return status;
}

}  // namespace fxprof::server::http
