#include "gecko/profile_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/json_string.h"
#include "gecko/gecko_reader.h"

namespace fxprof::gecko::internal {
namespace {

constexpr size_t kGzipInputBytes = size_t{256} << 10;
constexpr size_t kMaxDepth = 1024;  // simdjson's default: deeper documents are refused anyway

Result<size_t> read_fd(int fd, char* buf, size_t cap) {
  for (;;) {
    ssize_t n = ::read(fd, buf, cap);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return Err(errno_text(errno));
  }
}

class FileSource final : public TextSource {
 public:
  explicit FileSource(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<size_t> read(char* buf, size_t cap) override { return read_fd(fd_.get(), buf, cap); }

 private:
  UniqueFd fd_;
};

// gzip (several members too: cat a.gz b.gz is valid gzip), inflated as it is read, within the caps.
class GzipSource final : public TextSource {
 public:
  GzipSource(UniqueFd fd, size_t file_size)
      : fd_(std::move(fd)),
        in_(kGzipInputBytes),
        limit_(std::min(kMaxInflatedBytes, std::max<size_t>(file_size, 4096) * kMaxInflateRatio)) {}
  ~GzipSource() override {
    if (init_) inflateEnd(&z_);
  }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  Result<size_t> read(char* buf, size_t cap) override {
    if (!init_) {
      if (inflateInit2(&z_, 15 + 32) != Z_OK) return Err("cannot initialize zlib");
      init_ = true;
    }
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(cap, UINT32_MAX));
    const uInt room = z_.avail_out;
    for (;;) {
      const size_t produced = room - z_.avail_out;
      if (produced == room || (done_ && produced > 0)) return produced;
      if (z_.avail_in == 0 && !in_eof_) {
        auto n = read_fd(fd_.get(), in_.data(), in_.size());
        if (!n) return n;
        if (*n == 0) in_eof_ = true;
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(*n);
      }
      if (member_end_) {
        if (z_.avail_in == 0) {
          if (in_eof_) {
            done_ = true;
            return produced;
          }
          continue;
        }
        if (inflateReset(&z_) != Z_OK) return Err("corrupt gzip data");  // another member follows
        member_end_ = false;
      }
      if (done_) return produced;
      const uInt before = z_.avail_out;
      int rc = inflate(&z_, Z_NO_FLUSH);
      total_ += before - z_.avail_out;
      if (total_ > limit_) {
        char msg[160];
        std::snprintf(
            msg, sizeof msg,
            "gzip data inflates beyond %zux its size or %zu GiB (the limit for profiles: a gzip bomb?)",
            kMaxInflateRatio, kMaxInflatedBytes >> 30);
        return Err(msg);
      }
      if (rc == Z_STREAM_END) {
        member_end_ = true;
        continue;
      }
      if (rc == Z_OK) continue;
      if (rc == Z_BUF_ERROR) {  // no progress: out of input (there is output room)
        if (z_.avail_in == 0 && !in_eof_) continue;
        if (z_.avail_in == 0) return Err("truncated gzip data");
        return Err("corrupt gzip data");
      }
      return Err(std::string("corrupt gzip data") + (z_.msg ? std::string(" (") + z_.msg + ")" : ""));
    }
  }

 private:
  UniqueFd fd_;
  std::vector<char> in_;
  size_t limit_;
  size_t total_ = 0;
  z_stream z_{};
  bool init_ = false, in_eof_ = false, member_end_ = false, done_ = false;
};

class MemorySource final : public TextSource {
 public:
  MemorySource(std::string_view text, size_t chunk) : text_(text), chunk_(std::max<size_t>(chunk, 1)) {}
  Result<size_t> read(char* buf, size_t cap) override {
    const size_t n = std::min({cap, chunk_, text_.size() - at_});
    std::memcpy(buf, text_.data() + at_, n);
    at_ += n;
    return n;
  }

 private:
  std::string_view text_;
  size_t chunk_;
  size_t at_ = 0;
};

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The bytes that matter outside strings while a value is scanned.
constexpr std::array<bool, 256> kStructural = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {'"', '{', '}', '[', ']', ',', ':'}) t[c] = true;
  return t;
}();

}  // namespace

bool starts_like_json_object(std::string_view bytes) {
  size_t i = 0;
  if (bytes.size() >= 3 && bytes.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // a UTF-8 byte order mark
  while (i < bytes.size() && is_space(bytes[i])) ++i;
  return i < bytes.size() && bytes[i] == '{';
}

Result<OpenedSource> open_profile_source(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Err(path + ": " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) return Err(path + ": is a directory, not a profile file");
  // A FIFO, socket or device would block or never end: only regular files are profiles.
  if (!S_ISREG(st.st_mode))
    return Err(path + ": not a regular file (a pipe or device?); give a profile file");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Err(path + ": " + errno_text(errno));
  if (::fstat(fd.get(), &st) != 0) return Err(path + ": " + errno_text(errno));
  // Decided on the first bytes, before reading a large file that is no profile at all.
  char head[4096];
  size_t got = 0;
  while (got < sizeof head) {
    ssize_t n = ::pread(fd.get(), head + got, sizeof head - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Err(path + ": " + errno_text(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  const std::string_view bytes(head, got);
  if (bytes.empty()) return Err(path + ": empty file");
  OpenedSource out;
  out.gzip = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
             static_cast<unsigned char>(bytes[1]) == 0x8b;
  if (out.gzip) {
    out.source = std::make_unique<GzipSource>(std::move(fd), static_cast<size_t>(st.st_size));
    return out;
  }
  if (!starts_like_json_object(bytes)) {
    bool blank = got == static_cast<size_t>(st.st_size) &&
                 bytes.find_first_not_of(" \t\r\n") == std::string_view::npos;
    return Err(path + (blank ? ": empty file" : ": not a profile (neither JSON nor gzip)"));
  }
  out.source = std::make_unique<FileSource>(std::move(fd));
  return out;
}

std::unique_ptr<TextSource> memory_source(std::string_view text, size_t chunk) {
  return std::make_unique<MemorySource>(text, chunk);
}

Status PieceBuffer::append(const char* data, size_t n) {
  const size_t need = size_ + n + padding_;
  if (map_.size() < need) {
    const size_t want = std::max({need, map_.size() * 2, size_t{64} << 10});
    if (!map_.data()) {
      auto m = map_anonymous(want);
      if (!m) return Err(m.error());
      map_ = std::move(*m);
    } else if (auto s = grow_anonymous(map_, want); !s) {
      return s;
    }
  }
  std::memcpy(static_cast<char*>(map_.data()) + size_, data, n);
  size_ += n;
  return {};
}

JsonStream::JsonStream(TextSource& source, size_t chunk_bytes, size_t max_string)
    : source_(source), buf_(chunk_bytes), max_string_(max_string) {}

bool JsonStream::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  return false;
}

bool JsonStream::fill() {
  if (eof_ || failed()) return false;
  if (pos_ > 0) {  // keep what is not consumed yet
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    consumed_ += pos_;
    end_ -= pos_;
    pos_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
  auto n = source_.read(buf_.data() + end_, buf_.size() - end_);
  if (!n) return fail(n.error());
  if (*n == 0) {
    eof_ = true;
    return false;
  }
  end_ += *n;
  return true;
}

bool JsonStream::prefetch(size_t n) {
  while (end_ - pos_ < n && fill()) {
  }
  return !failed();
}

int JsonStream::peek() {
  for (;;) {
    while (pos_ < end_) {
      const char c = buf_[pos_];
      if (!is_space(c)) return static_cast<unsigned char>(c);
      ++pos_;
    }
    if (!fill()) return -1;
  }
}

bool JsonStream::copy(PieceBuffer* out, size_t from, size_t to) {
  if (!out || to == from) return true;
  if (auto s = out->append(buf_.data() + from, to - from); !s) return fail(s.error());
  return true;
}

bool JsonStream::too_long(const char* what, uint64_t from) {
  const std::string limit = max_string_ % (size_t{1} << 20) == 0 ? std::to_string(max_string_ >> 20) + " MiB"
                                                                 : std::to_string(max_string_) + " bytes";
  return fail(std::string(what) + " longer than " + limit + " at byte " + std::to_string(from) +
              " (the limit for one name or value)");
}

bool JsonStream::string(std::string& out, size_t max) {
  out.clear();
  ++pos_;  // the opening quote
  bool escaped = false;
  for (;;) {
    if (pos_ == end_ && !fill()) return failed() ? false : fail("truncated JSON");
    const char c = buf_[pos_++];
    if (!escaped && c == '"') return true;
    escaped = !escaped && c == '\\';
    if (out.size() < max) out.push_back(c);
  }
}

bool JsonStream::value(PieceBuffer* out) {
  int first = peek();
  if (first < 0) return failed() ? false : fail("truncated JSON");
  return first != '{' && first != '[' && first != '"' ? scalar(out) : composite(out);
}

// Up to the next delimiter. The text ending first is a truncated document: every value this stream reads is
// inside the top-level object.
bool JsonStream::scalar(PieceBuffer* out) {
  size_t start = pos_;
  const uint64_t from = offset();
  for (;;) {
    if (pos_ == end_) {
      if (!copy(out, start, pos_)) return false;
      if (offset() - from > max_string_) return too_long("a number", from);
      if (!fill()) return failed() ? false : fail("truncated JSON");
      start = pos_;
    }
    const char c = buf_[pos_];
    if (c == ',' || c == '}' || c == ']' || is_space(c)) {
      if (offset() - from > max_string_) return too_long("a number", from);
      return copy(out, start, pos_);
    }
    ++pos_;
  }
}

// One scan over the buffer per chunk (strings skipped in a tight loop, structural bytes found by table).
bool JsonStream::composite(PieceBuffer* out) {
  size_t start = pos_;
  std::vector<char> stack;  // the open brackets
  bool in_string = false, escaped = false;
  uint64_t string_from = 0;  // offset of the open string's quote
  // Offset of the bytes since the last structural byte or separator: a number, a literal or whitespace, one
  // value's worth at most (a 2 MB gzip of whitespace inside meta once took 432 MB to copy and parse).
  uint64_t run_from = offset();
  for (;;) {
    // A string (or a run) still open at a chunk's end is checked against the cap before the next chunk is
    // read, so at most one chunk more than the cap is ever held for it.
    if (in_string && offset() - string_from > max_string_) return too_long("a string", string_from);
    if (!in_string && offset() - run_from > max_string_) return too_long("a number or whitespace", run_from);
    if (pos_ == end_) {
      if (!copy(out, start, pos_)) return false;
      if (!fill()) return failed() ? false : fail("truncated JSON");
      start = pos_;
    }
    const char* b = buf_.data();
    size_t i = pos_;
    const size_t n = end_;
    bool done = false;
    while (i < n && !done) {
      if (escaped) {
        escaped = false;
        ++i;
        continue;
      }
      if (in_string) {
        while (i < n && b[i] != '"' && b[i] != '\\') ++i;
        if (i == n) break;
        if (b[i++] == '\\') {
          escaped = true;
          continue;
        }
        in_string = false;
        if (consumed_ + i - string_from > max_string_) return too_long("a string", string_from);
        run_from = consumed_ + i;
        done = stack.empty();
        continue;
      }
      while (i < n && !kStructural[static_cast<unsigned char>(b[i])]) ++i;
      if (i == n) break;
      if (consumed_ + i - run_from > max_string_) return too_long("a number or whitespace", run_from);
      const char c = b[i++];
      run_from = consumed_ + i;
      if (c == ',' || c == ':') continue;  // separators end a run, nothing more
      if (c == '"') {
        in_string = true;
        string_from = consumed_ + i - 1;
      } else if (c == '{' || c == '[') {
        if (stack.size() >= kMaxDepth) {
          pos_ = i;
          return fail("not valid JSON (nested too deeply)");
        }
        stack.push_back(c);
      } else {
        if (stack.empty() || stack.back() != (c == '}' ? '{' : '[')) {
          pos_ = i;
          return fail(json_syntax_error("a bracket that closes nothing open", offset() - 1));
        }
        stack.pop_back();
        done = stack.empty();
      }
    }
    pos_ = i;
    if (done) return copy(out, start, pos_);
  }
}

}  // namespace fxprof::gecko::internal
