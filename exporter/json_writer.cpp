#include "exporter/json_writer.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cmath>

namespace fxprof::exporter {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Writes to the temporary file, remembering the first error.
class PlainFile : public OutputFile {
 public:
  PlainFile(AtomicFile file, std::string path) : file_(std::move(file)), path_(std::move(path)) {}
  void write(std::string_view bytes) override {
    while (!bytes.empty() && error_.empty()) {
      ssize_t n = ::write(file_.fd(), bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        error_ = "cannot write " + path_ + ": " + errno_text(errno);
        return;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  Status finish() override {
    if (!error_.empty()) return Err(error_);
    return file_.commit();
  }

 protected:
  AtomicFile file_;
  std::string path_;
  std::string error_;
};

// gzip through zlib's deflate; level 1: profiles compress ~10x at level 1 and the writer stays I/O bound.
class GzipFile : public PlainFile {
 public:
  GzipFile(AtomicFile file, std::string path) : PlainFile(std::move(file), std::move(path)) {
    if (deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      error_ = "zlib init failed";
    else
      initialized_ = true;
  }
  ~GzipFile() override {
    if (initialized_) deflateEnd(&z_);
  }
  void write(std::string_view bytes) override { deflate_some(bytes, Z_NO_FLUSH); }
  Status finish() override {
    deflate_some({}, Z_FINISH);
    return PlainFile::finish();
  }

 private:
  void deflate_some(std::string_view bytes, int flush) {
    if (!initialized_ || !error_.empty()) return;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    z_.avail_in = static_cast<uInt>(bytes.size());
    char out[64 * 1024];
    for (;;) {
      z_.next_out = reinterpret_cast<Bytef*>(out);
      z_.avail_out = sizeof out;
      int rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) {
        error_ = "zlib deflate failed";
        return;
      }
      PlainFile::write(std::string_view(out, sizeof out - z_.avail_out));
      if (flush == Z_FINISH ? rc == Z_STREAM_END : z_.avail_out != 0) return;
    }
  }
  z_stream z_{};
  bool initialized_ = false;
};

}  // namespace

Result<std::unique_ptr<OutputFile>> OutputFile::create(const std::string& path) {
  auto file = AtomicFile::create(path);
  if (!file) return std::move(file).take_error();
  std::unique_ptr<OutputFile> out;
  if (ends_with(path, ".gz"))
    out = std::make_unique<GzipFile>(std::move(*file), path);
  else
    out = std::make_unique<PlainFile>(std::move(*file), path);
  return out;
}

void JsonWriter::comma() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) put(',');
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::begin_object() {
  comma();
  put('{');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  first_.pop_back();
  put('}');
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  comma();
  put('[');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  first_.pop_back();
  put(']');
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view k) {
  comma();
  append_json_string(buf_, k);
  put(':');
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view s) {
  comma();
  append_json_string(buf_, s);
  if (buf_.size() >= kBufferSize) flush();
  return *this;
}
JsonWriter& JsonWriter::value(int64_t n) {
  comma();
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, n);
  put(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t n) {
  comma();
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, n);
  put(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
  return *this;
}
JsonWriter& JsonWriter::value(double d) {
  if (!std::isfinite(d)) return null();
  comma();
  char tmp[32];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, d);
  put(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
  return *this;
}
JsonWriter& JsonWriter::value(bool b) {
  comma();
  put(b ? std::string_view("true") : std::string_view("false"));
  return *this;
}
JsonWriter& JsonWriter::null() {
  comma();
  put(std::string_view("null"));
  return *this;
}
JsonWriter& JsonWriter::raw(std::string_view json) {
  comma();
  put(json);
  return *this;
}
void JsonWriter::flush() {
  if (buf_.empty()) return;
  out_.write(buf_);
  buf_.clear();
}

}  // namespace fxprof::exporter
