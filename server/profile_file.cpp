// What a saved profile says about itself (its libs), read through the Gecko reader (capped).
#include <set>
#include <utility>

#include "gecko/gecko_reader.h"
#include "server/server.h"

namespace fxprof::server {

Result<ProfileInfo> inspect_profile(const std::string& path) {
  // The Gecko reader, streaming, with the caps every profile gets (gecko_reader.h: not a regular file, gzip
  // bombs, 1 MiB per value): each process's libraries, and a processed-format profile's (samply's) read to
  // its end without holding it (a 1 GiB processed file was parsed whole, 2.1 GB).
  gecko::ReadInfo read;
  read.libs_only = true;
  auto profile = gecko::read_gecko_profile(path, &read);
  if (!profile) return Err(profile.error());
  ProfileInfo info;
  info.gzip = read.gzip;
  info.processed = read.processed;
  std::set<std::pair<std::string, std::string>> seen;
  for (const model::Process& proc : profile->processes) {
    for (const model::Lib& l : proc.libs) {
      if (l.debug_name.empty() || l.breakpad_id.empty()) continue;  // never requested by the front end
      if (!seen.emplace(l.debug_name, l.breakpad_id).second) continue;
      info.has_local_paths |= !l.path.empty() && l.path[0] == '/';
      info.libs.push_back({l.debug_name, l.breakpad_id, l.name, l.path, l.debug_path, l.code_id, l.arch});
    }
  }
  return info;
}

}  // namespace fxprof::server
