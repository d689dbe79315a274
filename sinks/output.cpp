#include "sinks/output.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>

#include "base/fd.h"

namespace fxprof::sinks {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Writes to the temporary file (or the stream: base/fd.h resolve_output decides), remembering the first
// error.
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

Result<std::unique_ptr<OutputFile>> open_output(const std::string& path) { return OutputFile::create(path); }

std::string output_beside(const std::string& in, const std::string& extension) {
  std::string stem = in;
  for (std::string_view ext : {".json.gz", ".json", ".gz"})
    if (ends_with(stem, ext)) {
      stem.resize(stem.size() - ext.size());
      break;
    }
  return stem + extension;
}

}  // namespace fxprof::sinks
