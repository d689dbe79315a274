#include "sinks/output.h"

#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

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

 private:
  AtomicFile file_;
  std::string path_;
  std::string error_;
};

// Appends to the caller's string (an upload's body).
class MemoryBytes : public OutputFile {
 public:
  explicit MemoryBytes(std::string& bytes) : bytes_(bytes) {}
  void write(std::string_view bytes) override { bytes_.append(bytes); }
  Status finish() override { return {}; }

 private:
  std::string& bytes_;
};

// gzip through zlib's deflate into another output; level 1: profiles compress ~8x at level 1 and the writer
// stays I/O bound. Past its first megabyte the output is deflated on a thread of its own, a megabyte at a
// time, while the caller makes the next one: a large profile costs the longer of the two rather than their
// sum (cc1plus under --heap=full: 64 MB of JSON, 0.16 s to make and 0.27 s to deflate). One z_stream takes
// the buffers in order, so the bytes are those of deflating it all in one thread.
class Gzip : public OutputFile {
 public:
  explicit Gzip(std::unique_ptr<OutputFile> inner) : inner_(std::move(inner)) {
    if (deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      error_ = "zlib init failed";
    else
      initialized_ = true;
  }
  ~Gzip() override {
    abandoned_.store(true, std::memory_order_relaxed);  // never finished: the temporary file goes
    stop_thread();
    if (initialized_) deflateEnd(&z_);
  }
  void write(std::string_view bytes) override {
    filling_.append(bytes);
    if (filling_.size() >= kBuffer) hand_off();
  }
  Status finish() override {
    if (thread_.joinable()) {
      hand_off();
      stop_thread();
    } else {
      deflate_some(filling_, Z_NO_FLUSH);
    }
    filling_.clear();
    deflate_some({}, Z_FINISH);
    if (!error_.empty()) return Err(error_);
    return inner_->finish();
  }

 private:
  static constexpr size_t kBuffer = size_t{1} << 20;
  static constexpr size_t kInFlight = 4;  // buffers queued at most: the caller waits beyond (bounded memory)

  // Queues the filled buffer for the deflating thread (started on the first one).
  void hand_off() {
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [&] { return queue_.size() < kInFlight; });
    queue_.push_back(std::move(filling_));
    filling_.clear();
    if (!spare_.empty()) {  // a buffer the thread is done with: no allocation per megabyte
      filling_ = std::move(spare_.back());
      spare_.pop_back();
    }
    filling_.reserve(kBuffer + (256 << 10));
    work_.notify_one();
  }
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;
      std::string buf = std::move(queue_.front());
      queue_.pop_front();
      room_.notify_one();
      lock.unlock();
      // Only this thread uses the z_stream, error_ and inner_ until stop_thread() joins it.
      if (!abandoned_.load(std::memory_order_relaxed)) deflate_some(buf, Z_NO_FLUSH);
      buf.clear();
      lock.lock();
      spare_.push_back(std::move(buf));
    }
  }
  // Lets the thread deflate what is queued (or drop it, abandoned_) and end, and joins it.
  void stop_thread() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_.notify_one();
    thread_.join();
  }
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
      inner_->write(std::string_view(out, sizeof out - z_.avail_out));
      if (flush == Z_FINISH ? rc == Z_STREAM_END : z_.avail_out != 0) return;
    }
  }
  std::unique_ptr<OutputFile> inner_;
  std::string error_;
  z_stream z_{};
  bool initialized_ = false;
  std::string filling_;  // the caller's buffer
  std::mutex mu_;        // guards queue_, spare_, stopping_
  std::condition_variable work_, room_;
  std::deque<std::string> queue_;
  std::vector<std::string> spare_;
  bool stopping_ = false;
  std::atomic<bool> abandoned_{false};
  std::thread thread_;  // last: it uses the members above
};

}  // namespace

Result<std::unique_ptr<OutputFile>> OutputFile::create(const std::string& path) {
  auto file = AtomicFile::create(path);
  if (!file) return std::move(file).take_error();
  std::unique_ptr<OutputFile> out = std::make_unique<PlainFile>(std::move(*file), path);
  if (ends_with(path, ".gz")) out = std::make_unique<Gzip>(std::move(out));
  return out;
}

std::unique_ptr<OutputFile> OutputFile::in_memory(std::string& bytes, bool gzip) {
  std::unique_ptr<OutputFile> out = std::make_unique<MemoryBytes>(bytes);
  if (gzip) out = std::make_unique<Gzip>(std::move(out));
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
