// fxprof exporter: a streaming JSON writer over an output sink (plain file or gzip), used by the Gecko
// exporter and by anything else that writes profiles (the server's presymbolication).
//
// Profiles are never built as a JSON tree in memory: values go straight into a 256 KiB buffer that is flushed
// to the file or to zlib. The writer tracks commas itself, so callers just emit keys and values in order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/json_string.h"
#include "base/result.h"

namespace fxprof::exporter {

// Where bytes go: a temporary file beside the target (renamed on finish()), gzip-compressed when the target
// name ends in ".gz". Nothing appears under the final name unless finish() succeeds.
class OutputFile {
 public:
  static Result<std::unique_ptr<OutputFile>> create(const std::string& path);
  virtual ~OutputFile() = default;
  virtual void write(std::string_view bytes) = 0;  // errors are remembered and reported by finish()
  virtual Status finish() = 0;                     // flush, close, rename
};

class JsonWriter {
 public:
  explicit JsonWriter(OutputFile& out) : out_(out) { buf_.reserve(kBufferSize + 4096); }
  ~JsonWriter() { flush(); }

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);  // inside an object, before its value
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t n);
  JsonWriter& value(uint64_t n);
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(unsigned n) { return value(static_cast<uint64_t>(n)); }
  JsonWriter& value(double d);  // shortest form that round-trips; non-finite as null
  JsonWriter& value(bool b);
  JsonWriter& null();
  // Writes already-serialized JSON as one value (for example a value copied from another document).
  JsonWriter& raw(std::string_view json);
  void flush();

 private:
  static constexpr size_t kBufferSize = 256 * 1024;
  void comma();
  void put(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= kBufferSize) flush();
  }
  void put(char c) {
    buf_.push_back(c);
    if (buf_.size() >= kBufferSize) flush();
  }
  OutputFile& out_;
  std::string buf_;
  std::vector<bool> first_;  // per open container: no value written yet
  bool after_key_ = false;
};

}  // namespace fxprof::exporter
