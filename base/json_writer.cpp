#include "base/json_writer.h"

#include <charconv>
#include <cmath>

namespace fxprof {

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
void JsonWriter::flush() {
  if (sink_ == nullptr || buf_.empty()) return;
  sink_->write(buf_);
  buf_.clear();
}

}  // namespace fxprof
