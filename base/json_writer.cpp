#include "base/json_writer.h"

#include <charconv>
#include <cmath>

namespace fxprof {

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
  maybe_flush();
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
JsonWriter& JsonWriter::hex_value(uint64_t n) {
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
JsonWriter& JsonWriter::raw(std::string_view json) {
  comma();
  put(json);
  return *this;
}
void JsonWriter::flush() {
  if (sink_ == nullptr || buf_.empty()) return;
  sink_->write(buf_);
  buf_.clear();
}

}  // namespace fxprof
