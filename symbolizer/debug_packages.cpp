#include "symbolizer/debug_packages.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

// Each line of the file, read 64 KiB at a time: a list can be 4 MB (google-cloud-cli's), and fxprof may
// run under `ulimit -v` with little room (reading lists whole ran a 32 MiB `report` out of memory).
template <class F>
void for_each_line(int fd, F&& line) {
  std::vector<char> buf(size_t{64} << 10);
  std::string partial;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    for (size_t nl; (nl = chunk.find('\n')) != std::string_view::npos; chunk.remove_prefix(nl + 1)) {
      if (partial.empty()) {
        line(chunk.substr(0, nl));
      } else {
        partial.append(chunk.substr(0, nl));
        line(std::string_view(partial));
        partial.clear();
      }
    }
    if (partial.size() < 4096) partial.append(chunk);  // a path is short; a longer line is no path
  }
  if (!partial.empty()) line(std::string_view(partial));
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
    const std::string_view package = name.substr(0, std::min(name.size() - 5, name.find(':')));
    for_each_line(fd.get(), [&](std::string_view line) {
      auto it = wanted.find(line);
      if (it == wanted.end() || !owner[it->second].empty()) return;
      owner[it->second] = debug_package_of(package);
      --left;
    });
  }
  std::vector<std::string> out;
  for (std::string& o : owner)
    if (!o.empty()) out.push_back(std::move(o));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace fxprof::symbolizer
