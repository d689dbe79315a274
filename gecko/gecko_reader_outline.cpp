// fxprof gecko, the Gecko reader: the streamed outline (the top-level object, `threads`, `processes`),
// the errors the pieces report, and {schema, data} tables' schemas.
#include <string>

#include "base/json_string.h"
#include "gecko/gecko_reader_internal.h"

namespace fxprof::gecko::internal {

bool Reader::stream_error() {
  if (err_.empty()) err_ = name_ + ": " + (js_.failed() ? js_.error() : std::string("truncated JSON"));
  return false;
}
bool Reader::syntax_error() {
  if (err_.empty()) {
    err_ =
        name_ + ": " +
        json_syntax_error("unexpected '" + std::string(1, static_cast<char>(js_.peek())) + "'", js_.offset());
  }
  return false;
}

// One member of a process object (the top level or an entry of `processes`), in document order.
bool Reader::process_member(std::string_view k, bool top) {
  if (k == "meta") return piece([&](od::value v) { return read_meta(v, top); });
  if (k == "shared" && top) {  // {stringArray}: the processed format's, never Gecko's
    info_.processed = true;
    return info_.libs_only ? skip() : true;  // refused: nothing more is read
  }
  if (k == "libs") return piece([&](od::value v) { return read_libs(v); });
  // The processed format (samply's, read only for its libraries): the top level's, and each thread's
  // before version 41; nothing else of it is this reader's to parse.
  if (info_.processed) {
    if (k != "threads" || !top) return skip();
    return array([&] {
      if (js_.peek() != '{') return skip();
      return members([&](std::string_view k2) {
        return k2 == "libs" ? piece([&](od::value v) { return read_libs(v); }) : skip();
      });
    });
  }
  if (k == "counters") return info_.libs_only ? skip() : piece([&](od::value v) { return read_counters(v); });
  if (k == "threads") {
    saw_threads_ |= top && js_.peek() == '[';
    if (info_.libs_only) return skip();
    return array([&] { return thread(); });
  }
  if (k == "processes" && top) {
    const size_t parent = cur_;
    bool ok = array([&] {
      if (js_.peek() != '{') return skip();
      start_process();
      const size_t me = cur_;
      bool pok = members([&](std::string_view k2) { return process_member(k2, false); });
      if (pok && !info_.processed) finish_process(me, false);
      return pok;
    });
    cur_ = parent;
    return ok;
  }
  return skip();
}

// ---- the pieces ----

Error Reader::fail(simdjson::error_code e) {
  if (e == simdjson::NUMBER_ERROR || e == simdjson::NUMBER_OUT_OF_RANGE) {
    return Err(name_ + ": a number beyond the range of a double" + where());
  }
  return Err(name_ + ": " + describe_json_error(piece_.view(), static_cast<int>(e)));
}
bool Reader::set(simdjson::error_code e) {
  if (err_.empty()) err_ = fail(e).message;
  return false;
}
bool Reader::bad(const std::string& what) {
  if (err_.empty()) err_ = name_ + ": not a Firefox Profiler profile (" + what + ")";
  return false;
}
std::string Reader::where() {
  if (!doc_) return {};
  const char* at = nullptr;
  if (doc_->current_location().get(at) || !at) return {};
  return " (near byte " + std::to_string(piece_offset_ + static_cast<uint64_t>(at - piece_.data())) + ")";
}

bool Reader::schema(od::value v, Schema& s) {
  return fields(v, [&](std::string_view k, od::value c) {
    int64_t i = -1;
    if (!integer(c, i)) return false;
    if (i < 0 || i > 64) return bad("a schema column out of range");
    s.cols.emplace(std::string(k), i);
    return true;
  });
}

}  // namespace fxprof::gecko::internal
