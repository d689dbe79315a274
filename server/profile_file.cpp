// Reading saved profiles: gzip by magic, simdjson DOM, one-line errors that name the file.
#include <simdjson.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "base/fd.h"
#include "server/internal.h"
#include "server/server.h"

namespace fxprof::server {
namespace {

constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;

Result<std::string> inflate_all(std::string_view in, const std::string& path) {
  std::string out;
  // Profiles compress 8-15x; start there and grow geometrically.
  out.reserve(std::min<size_t>(in.size() * 10 + kPadding, size_t{1} << 34));
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return Err(path + ": cannot initialize zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  size_t remaining_in = in.size() - z.avail_in;
  std::string error;
  for (;;) {
    if (out.capacity() - out.size() < 65536 + kPadding) out.reserve(out.capacity() * 2);
    size_t old = out.size();
    size_t room = out.capacity() - old - kPadding;
    out.resize(old + room);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + old);
    z.avail_out = static_cast<uInt>(std::min<size_t>(room, UINT32_MAX));
    uInt before = z.avail_out;
    int rc = inflate(&z, Z_NO_FLUSH);
    out.resize(old + (before - z.avail_out));
    if (z.avail_in == 0 && remaining_in > 0) {
      size_t chunk = std::min<size_t>(remaining_in, UINT32_MAX);
      z.avail_in = static_cast<uInt>(chunk);
      remaining_in -= chunk;
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0 && remaining_in == 0) break;
      // Another gzip member follows (cat a.gz b.gz is valid gzip).
      if (inflateReset(&z) != Z_OK) {
        error = "corrupt gzip data";
        break;
      }
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {  // no progress possible: out of input (we always give output room)
      error = z.avail_in == 0 && remaining_in == 0 ? "truncated gzip data" : "corrupt gzip data";
      break;
    }
    error = std::string("corrupt gzip data") + (z.msg ? std::string(" (") + z.msg + ")" : "");
    break;
  }
  inflateEnd(&z);
  if (!error.empty()) return Err(path + ": " + error);
  return out;
}

void add_libs(simdjson::dom::element libs, std::map<std::pair<std::string, std::string>, size_t>& seen,
              ProfileInfo& info) {
  simdjson::dom::array arr;
  if (libs.get_array().get(arr)) return;
  for (simdjson::dom::element lib : arr) {
    simdjson::dom::object o;
    if (lib.get_object().get(o)) continue;
    auto str = [&](const char* key) {
      std::string_view v;
      if (o[key].get_string().get(v)) return std::string();
      return std::string(v);
    };
    symbolizer::KnownLib k;
    k.debug_name = str("debugName");
    k.breakpad_id = str("breakpadId");
    if (k.debug_name.empty() || k.breakpad_id.empty()) continue;  // never requested by the front end
    k.name = str("name");
    k.path = str("path");
    k.debug_path = str("debugPath");
    k.code_id = str("codeId");
    k.arch = str("arch");
    if (!k.path.empty() && k.path[0] == '/') info.has_local_paths = true;
    auto key = std::make_pair(k.debug_name, k.breakpad_id);
    if (seen.emplace(key, info.libs.size()).second) info.libs.push_back(std::move(k));
  }
}

void collect_process_libs(simdjson::dom::object process,
                          std::map<std::pair<std::string, std::string>, size_t>& seen, ProfileInfo& info,
                          int depth) {
  simdjson::dom::element libs;
  if (!process["libs"].get(libs)) add_libs(libs, seen, info);
  simdjson::dom::array threads;
  if (!process["threads"].get_array().get(threads)) {
    for (simdjson::dom::element t : threads) {
      simdjson::dom::element tl;
      if (!t["libs"].get(tl)) add_libs(tl, seen, info);  // processed format before v41
    }
  }
  simdjson::dom::array procs;
  if (depth < 8 && !process["processes"].get_array().get(procs)) {
    for (simdjson::dom::element p : procs) {
      simdjson::dom::object po;
      if (!p.get_object().get(po)) collect_process_libs(po, seen, info, depth + 1);
    }
  }
}

}  // namespace

namespace internal {

std::string describe_json_error(std::string_view text, simdjson::error_code e) {
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
  if (in_string || depth > 0 || e == simdjson::UNCLOSED_STRING || e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT) {
    return "truncated JSON";
  }
  return std::string("not valid JSON (") + simdjson::error_message(e) + ")";
}

}  // namespace internal

Result<std::string> read_profile_file(const std::string& path, bool* was_gzip) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Err(path + ": " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) return Err(path + ": is a directory, not a profile file");
  auto mapped = map_file(path);
  if (!mapped) return Err(mapped.error());
  std::string_view bytes = mapped->view();
  if (bytes.empty()) return Err(path + ": empty file");
  bool gz = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
            static_cast<unsigned char>(bytes[1]) == 0x8b;
  if (was_gzip) *was_gzip = gz;
  if (gz) {
    auto text = inflate_all(bytes, path);
    if (text && text->empty()) return Err(path + ": empty file (inside gzip)");
    return text;
  }
  std::string text;
  text.reserve(bytes.size() + kPadding);
  text.assign(bytes);
  return text;
}

Result<ProfileInfo> inspect_profile(const std::string& path) {
  ProfileInfo info;
  auto text = read_profile_file(path, &info.gzip);
  if (!text) return Err(text.error());
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto e = parser.parse(text->data(), text->size(), false).get(root)) {
    return Err(path + ": " + internal::describe_json_error(*text, e));
  }
  simdjson::dom::object top;
  if (root.get_object().get(top)) return Err(path + ": not a Firefox Profiler profile (not a JSON object)");
  simdjson::dom::object wrapped;
  if (!top["profile"].get_object().get(wrapped)) top = wrapped;  // {profile: <gecko>} (old DevTools export)
  simdjson::dom::object meta;
  if (top["meta"].get_object().get(meta)) {
    return Err(path + ": not a Firefox Profiler profile (no \"meta\" object)");
  }
  double processed_version = 0;
  if (!meta["preprocessedProfileVersion"].get_double().get(processed_version)) {
    info.processed = true;
  } else {
    double version = 0;
    if (meta["version"].get_double().get(version)) {
      return Err(path + ": not a Firefox Profiler profile (no meta.version)");
    }
    simdjson::dom::array threads;
    if (top["threads"].get_array().get(threads)) {
      return Err(path + ": not a Firefox Profiler profile (no \"threads\" array)");
    }
  }
  std::map<std::pair<std::string, std::string>, size_t> seen;
  collect_process_libs(top, seen, info, 0);
  return info;
}

}  // namespace fxprof::server
