// What a saved profile says about itself (its libs), read through the Gecko reader (capped).
#include <simdjson.h>

#include <map>
#include <utility>

#include "gecko/gecko_reader.h"
#include "server/server.h"

namespace fxprof::server {
namespace {

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

Result<ProfileInfo> inspect_profile(const std::string& path) {
  ProfileInfo info;
  // The Gecko reader, with the caps every profile gets (gecko_reader.h: not a regular file, gzip bombs).
  // Only processed-format profiles (samply's) are inspected here: the whole text is parsed for their libs.
  auto text = gecko::read_profile_bytes(path, &info.gzip);
  if (!text) return Err(text.error());
  text->reserve(text->size() + simdjson::SIMDJSON_PADDING);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto e = parser.parse(text->data(), text->size(), false).get(root)) {
    return Err(path + ": " + gecko::describe_json_error(*text, e));
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
