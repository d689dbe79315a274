// fxprof base: the one JSON writer. Everything fxprof writes as JSON goes through it: profiles and reports
// (streamed to a file or to gzip through a ByteSink) and the server's API answers (built in a string).
//
// No JSON tree is ever built in memory: values are appended to a buffer as they come. Over a sink the buffer
// is flushed every 256 KiB; over a string the string is the buffer (no copy, reserve it up front when the
// size is known). The writer places commas itself, so callers just emit keys and values in order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_string.h"

namespace fxprof {

// Where a streaming writer's bytes go (the exporter's files, standard output, gzip).
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(std::string_view bytes) = 0;  // errors are the sink's to remember and report
};

class JsonWriter {
 public:
  // Buffered over a sink: flushed every 256 KiB and when the writer goes away.
  explicit JsonWriter(ByteSink& sink) : buf_(own_), sink_(&sink) { own_.reserve(kBufferSize + 4096); }
  // Appends to `out` (what is already there stays).
  explicit JsonWriter(std::string& out) : buf_(out) {}
  ~JsonWriter() { flush(); }
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

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
  // "0x…" (lowercase hex) as a string value, as the symbolication APIs write addresses.
  JsonWriter& hex_value(uint64_t n);
  // Writes already-serialized JSON as one value: a value copied from another document, or a string literal
  // escaped once and written many times (the symbolizer's names).
  JsonWriter& raw(std::string_view json);
  // Only over a sink: hands the buffer to it now.
  void flush();

 private:
  static constexpr size_t kBufferSize = 256 * 1024;
  void comma();
  void put(std::string_view s) {
    buf_.append(s);
    maybe_flush();
  }
  void put(char c) {
    buf_.push_back(c);
    maybe_flush();
  }
  void maybe_flush() {
    if (sink_ != nullptr && buf_.size() >= kBufferSize) flush();
  }
  std::string own_;  // the buffer over a sink
  std::string& buf_;
  ByteSink* sink_ = nullptr;
  std::vector<bool> first_;  // per open container: no value written yet
  bool after_key_ = false;
};

}  // namespace fxprof
