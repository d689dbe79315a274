// fxprof base: the one JSON writer. Everything fxprof writes as JSON goes through it: profiles and reports
// (streamed to a file or to gzip through a ByteSink) and the server's API answers (built in a string).
//
// No JSON tree is ever built in memory: values are appended to a buffer as they come. Over a sink the buffer
// is flushed every 256 KiB; over a string the string is the buffer (no copy, reserve it up front when the
// size is known). The writer places commas itself, so callers just emit keys and values in order.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_string.h"

namespace fxprof {

// Where a streaming writer's bytes go (the sinks' files, standard output, gzip).
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

  // The structural calls and keys are inline: a /symbolicate/v5 answer makes tens of them per address.
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& key(std::string_view k) {  // inside an object, before its value
    comma();
    if (plain(k)) {
      buf_.push_back('"');
      buf_.append(k);
      buf_.append("\":", 2);
    } else {
      append_json_string(buf_, k);
      buf_.push_back(':');
    }
    after_key_ = true;
    maybe_flush();
    return *this;
  }
  // A literal key is written as it is, unchecked: it must need no escaping (every key fxprof writes). Its
  // comma, quotes and colon go in with it, in one append.
  template <size_t N>
  JsonWriter& key(const char (&k)[N]) {
    char tmp[N + 3];
    size_t n = 0;
    if (needs_comma()) tmp[n++] = ',';
    tmp[n++] = '"';
    std::memcpy(tmp + n, k, N - 1);
    n += N - 1;
    tmp[n++] = '"';
    tmp[n++] = ':';
    buf_.append(tmp, n);
    after_key_ = true;
    maybe_flush();
    return *this;
  }
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(int64_t n);
  JsonWriter& value(uint64_t n) {
    comma();
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, n);
    put(std::string_view(tmp, static_cast<size_t>(r.ptr - tmp)));
    return *this;
  }
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(unsigned n) { return value(static_cast<uint64_t>(n)); }
  JsonWriter& value(double d);  // shortest form that round-trips; non-finite as null
  JsonWriter& value(bool b);
  JsonWriter& null();
  // "0x…" (lowercase hex) as a string value, as the symbolication APIs write addresses.
  JsonWriter& hex_value(uint64_t n) {
    comma();
    char tmp[24];
    char* p = tmp + sizeof tmp;
    *--p = '"';
    do {
      *--p = "0123456789abcdef"[n & 15];
      n >>= 4;
    } while (n != 0);
    *--p = 'x';
    *--p = '0';
    *--p = '"';
    put(std::string_view(p, static_cast<size_t>(tmp + sizeof tmp - p)));
    return *this;
  }
  // Writes already-serialized JSON as one value: a value copied from another document, or a string literal
  // escaped once and written many times (the symbolizer's names).
  JsonWriter& raw(std::string_view json) {
    comma();
    put(json);
    return *this;
  }
  // Only over a sink: hands the buffer to it now.
  void flush();

 private:
  static constexpr size_t kBufferSize = 256 * 1024;
  // Whether the next value needs a comma before it; marks the container as no longer empty.
  bool needs_comma() {
    if (after_key_) {
      after_key_ = false;
      return false;
    }
    if (first_.empty()) return false;
    bool comma = !first_.back();
    first_.back() = false;
    return comma;
  }
  void comma() {
    if (needs_comma()) buf_.push_back(',');
  }
  JsonWriter& open(char c) {
    comma();
    put(c);
    first_.push_back(true);
    return *this;
  }
  JsonWriter& close(char c) {
    first_.pop_back();
    put(c);
    return *this;
  }
  // No character that needs escaping (keys are nearly always plain ASCII).
  static bool plain(std::string_view s) {
    for (char ch : s) {
      auto c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) return false;
    }
    return true;
  }
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
  std::vector<char> first_;  // per open container: no value written yet (char: faster than vector<bool>)
  bool after_key_ = false;
};

}  // namespace fxprof
