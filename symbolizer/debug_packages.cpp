#include "symbolizer/debug_packages.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "base/fd.h"

namespace fxprof::symbolizer {
namespace {

// dpkg lists a file by the path its package ships; with merged /usr the same file is also reached through
// /lib or /bin (and the kernel's maps say /usr/lib for a library dpkg lists under /lib).
std::vector<std::string> spellings(const std::string& path) {
  std::vector<std::string> out{path};
  for (std::string_view top : {"/lib/", "/lib64/", "/bin/", "/sbin/"}) {
    if (path.starts_with(std::string("/usr") + std::string(top))) out.push_back(path.substr(4));
    if (path.starts_with(top)) out.push_back("/usr" + path);
  }
  return out;
}

struct ViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

std::string debug_package_of(std::string_view package) {
  if (package == "libc6") return "libc6-dbg";
  return std::string(package) + "-dbgsym";
}

// A list file as dpkg wrote it: root's, written by nobody else; the rest could name any package.
bool trusted(int dir_fd, const char* name, UniqueFd& fd) {
  fd = UniqueFd(::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  return fd.valid() && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

}  // namespace

std::vector<std::string> debug_packages(std::span<const std::string> binaries, const std::string& dpkg_info) {
  std::unordered_map<std::string, size_t, ViewHash, std::equal_to<>>
      wanted;  // a spelling -> its binary's index
  for (size_t i = 0; i < binaries.size(); ++i)
    for (std::string& s : spellings(binaries[i])) wanted.emplace(std::move(s), i);
  std::vector<std::string> owner(binaries.size());
  size_t left = binaries.size();
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(dpkg_info.c_str()), ::closedir);
  while (dir && left > 0) {
    const dirent* e = ::readdir(dir.get());
    if (!e) break;
    std::string_view name = e->d_name;
    if (!name.ends_with(".list")) continue;
    UniqueFd fd;
    if (!trusted(::dirfd(dir.get()), e->d_name, fd)) continue;
    auto text = read_file("/proc/self/fd/" + std::to_string(fd.get()));
    if (!text) continue;
    std::string_view package = name.substr(0, std::min(name.size() - 5, name.find(':')));
    for (std::string_view rest = *text; !rest.empty();) {
      size_t eol = std::min(rest.find('\n'), rest.size());
      auto it = wanted.find(rest.substr(0, eol));
      rest.remove_prefix(std::min(eol + 1, rest.size()));
      if (it == wanted.end() || !owner[it->second].empty()) continue;
      owner[it->second] = debug_package_of(package);
      --left;
    }
  }
  std::vector<std::string> out;
  for (std::string& o : owner)
    if (!o.empty()) out.push_back(std::move(o));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace fxprof::symbolizer
