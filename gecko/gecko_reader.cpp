// fxprof gecko, the Gecko reader: its entry points (gecko_reader.h) and the run over a whole document;
// the outline, the process members and each thread table are in gecko_reader_*.cpp.
#include "gecko/gecko_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <string>

#include "gecko/gecko_reader_internal.h"
#include "gecko/profile_stream.h"
#include "model/waits.h"

namespace fxprof::gecko::internal {

Result<model::Profile> Reader::run() {
  const int first = js_.peek();
  if (first < 0) return Err(name_ + ": " + (js_.failed() ? js_.error() : std::string("empty file")));
  if (first != '{') return Err(name_ + ": not a Firefox Profiler profile (not a JSON object)");
  start_process();
  bool ok = members([&](std::string_view k) {
    if (k == "profile" && !saw_meta_) {  // {profile: <gecko>} (old DevTools export): unwrap
      if (js_.peek() != '{') return skip();
      return members([&](std::string_view k2) { return process_member(k2, true); });
    }
    return process_member(k, true);
  });
  if (!ok) return Err(err_);
  if (info_.processed && !info_.libs_only) return model::Profile{};
  // Only whitespace may follow; reading to the end also checks the rest of the gzip data.
  if (js_.peek() >= 0) return Err(name_ + ": not valid JSON (more after the profile's object)");
  if (js_.failed()) return Err(name_ + ": " + js_.error());
  if (info_.processed) return std::move(p_);  // its libraries, read as they came
  finish_process(0, true);
  if (!saw_meta_) return Err(name_ + ": not a Firefox Profiler profile (no \"meta\" object)");
  if (!saw_threads_) return Err(name_ + ": not a Firefox Profiler profile (no \"threads\" array)");
  model::read_waits(p_);  // the typed waits, from their markers (model/waits.h)
  return std::move(p_);
}

}  // namespace fxprof::gecko::internal

namespace fxprof::gecko {

std::string describe_json_error(std::string_view text, int simdjson_error) {
  auto e = static_cast<simdjson::error_code>(simdjson_error);
  if (e == simdjson::EMPTY) return "empty file";
  // simdjson reports a cut-off document as a structure error; an unclosed string, object or array at the
  // end is what a truncated file looks like, and that is the more useful thing to say.
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  if (in_string || depth > 0 || e == simdjson::UNCLOSED_STRING || e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT)
    return "truncated JSON";
  return std::string("not valid JSON (") + simdjson::error_message(e) + ")";
}

Result<std::string> read_profile_bytes(const std::string& path, bool* was_gzip) {
  auto opened = internal::open_profile_source(path);
  if (!opened) return Err(opened.error());
  if (was_gzip) *was_gzip = opened->gzip;
  std::string out;
  for (;;) {
    if (out.capacity() - out.size() < 65536) out.reserve(out.capacity() * 2 + 65536);
    const size_t old = out.size();
    out.resize(out.capacity());
    auto n = opened->source->read(out.data() + old, out.size() - old);
    if (!n) return Err(path + ": " + n.error());
    out.resize(old + *n);
    if (*n == 0) break;
  }
  if (opened->gzip && out.empty()) return Err(path + ": empty file (inside gzip)");
  if (opened->gzip && !internal::starts_like_json_object(std::string_view(out).substr(0, 4096)))
    return Err(path + ": not a profile (the gzip data is not JSON)");
  return out;
}

Result<model::Profile> read_gecko(std::string_view json, const std::string& name, ReadInfo* info,
                                  size_t chunk_bytes, size_t max_string_bytes) {
  ReadInfo local;
  auto source = internal::memory_source(json, chunk_bytes);
  internal::JsonStream js(*source, std::max<size_t>(std::min(chunk_bytes, json.size()), 4096),
                          max_string_bytes);
  if (!js.prefetch(3)) return Err(name + ": " + js.error());
  js.skip_bom();
  internal::Reader r(name, js, info ? *info : local);
  return r.run();
}

Result<model::Profile> read_gecko_profile(const std::string& path, ReadInfo* info) {
  ReadInfo local;
  ReadInfo& i = info ? *info : local;
  auto opened = internal::open_profile_source(path);
  if (!opened) return Err(opened.error());
  i.gzip = opened->gzip;
  internal::JsonStream js(*opened->source, kReadChunkBytes, kMaxJsonStringBytes);
  if (!js.prefetch(4096)) return Err(path + ": " + js.error());
  if (opened->gzip) {  // the first inflated bytes decide, before inflating on
    if (js.buffered().empty()) return Err(path + ": empty file (inside gzip)");
    if (!internal::starts_like_json_object(js.buffered().substr(0, 4096)))
      return Err(path + ": not a profile (the gzip data is not JSON)");
  }
  js.skip_bom();
  internal::Reader r(path, js, i);
  return r.run();
}

}  // namespace fxprof::gecko
