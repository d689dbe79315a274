// Kept descriptors of mapped binaries (kept_files.h).
#include "recorder/kept_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_map>

namespace fxprof::recorder {

namespace {

// Where a kept descriptor's file is read while fxprof runs (recorder and symbolizer alike).
std::string fd_path(const UniqueFd& fd) { return "/proc/self/fd/" + std::to_string(fd.get()); }

}  // namespace

std::string KeptFiles::keep(uint32_t pid, uint64_t start, uint64_t end, const std::string& path, uint64_t dev,
                            uint64_t ino, const Binary** binary) {
  const Binary* ignored = nullptr;
  const Binary*& found = binary ? *binary : ignored;
  found = nullptr;
  const std::string key = std::to_string(dev) + ':' + std::to_string(ino);
  // The record's device can differ from what stat() shows through an overlay (containers): only a file on
  // the same device with another inode is taken for a replacement.
  auto same_file = [&](const struct stat& st) { return st.st_ino == ino || st.st_dev != dev; };
  // In a container the path is the container's: a host file there is another file, whatever dev and ino say
  // (an overlay shows another device).
  const bool foreign = other_mount_ns(pid);
  struct stat st {};
  const bool at_path = !foreign && ::stat(path.c_str(), &st) == 0 && same_file(st);
  if (auto it = kept_index_.find(key); it != kept_index_.end()) {
    // Opened now, while the path leads to it (the launched executable is kept from its exec, before its
    // mapping is read: it may be deleted meanwhile); gone already, it is read through the descriptor.
    if (at_path) {
      found = &binaries_.get(path, st);
      if (found->identity) return path;
      found = nullptr;
    }
    return fd_path(kept_[it->second].fd);
  }
  // A descriptor per distinct binary (tens in a recording); past this many, only deleted ones are kept.
  constexpr size_t kMaxKept = 512;
  if (at_path) found = &binaries_.get(path, st);
  if (at_path && kept_.size() >= kMaxKept) return path;
  UniqueFd fd;
  if (at_path) {
    // The table of binaries opens it (once for the builder, the unwinder and this descriptor).
    const Binary& b = *found;
    if (b.file.fd.valid()) fd.reset(::fcntl(b.file.fd.get(), F_DUPFD_CLOEXEC, 0));
  } else {
    // The container's file through its root (any user who may trace the process), or, gone or replaced
    // since it was mapped: the mapping itself (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), or the
    // process's executable (any user who may trace it).
    if (foreign)
      fd.reset(::open(("/proc/" + std::to_string(pid) + "/root" + path).c_str(), O_RDONLY | O_CLOEXEC));
    char range[80];
    std::snprintf(range, sizeof range, "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
    if (!fd.valid()) fd.reset(::open(range, O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
      char target[4096];
      const ssize_t n = readlink(exe.c_str(), target, sizeof target - 1);
      const std::string_view link(target, n > 0 ? static_cast<size_t>(n) : 0);
      if (link == path || link == path + " (deleted)") fd.reset(::open(exe.c_str(), O_RDONLY | O_CLOEXEC));
    }
    struct stat fst {};
    if (fd.valid() && (fstat(fd.get(), &fst) != 0 || (foreign ? !same_file(fst) : fst.st_ino != ino)))
      fd.reset();
    if (!fd.valid()) {
      if (std::find(unreadable_.begin(), unreadable_.end(), path) == unreadable_.end())
        unreadable_.push_back(path);
      return path;
    }
  }
  if (!fd.valid()) return path;
  kept_index_[key] = kept_.size();
  kept_.push_back({std::move(fd), path, foreign, key});
  return at_path ? path : fd_path(kept_.back().fd);
}

void KeptFiles::keep_executable(uint32_t pid) {
  const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
  char target[4096];
  const ssize_t n = readlink(exe.c_str(), target, sizeof target - 1);
  if (n <= 0 || target[0] != '/' || other_mount_ns(pid)) return;  // gone already, or a container's path
  UniqueFd fd(::open(exe.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0) return;
  // The key MMAP2 records give (makedev(maj, min):ino), so keep() finds this descriptor.
  const std::string key = std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino);
  if (kept_index_.count(key)) return;
  std::string path(target, static_cast<size_t>(n));
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  kept_index_[key] = kept_.size();
  kept_.push_back({std::move(fd), std::move(path), false, key});
}

bool KeptFiles::other_mount_ns(uint32_t pid) {
  // Asked at each new executable mapping (one readlink), not cached by pid: `unshare -m` changes the
  // namespace of the process that then execs the program.
  auto ns_of = [](const std::string& link) {
    char buf[64];
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  static const std::string own = ns_of("/proc/self/ns/mnt");
  const std::string theirs = ns_of("/proc/" + std::to_string(pid) + "/ns/mnt");
  // Unknown (the process is gone, or not ours to read): the host's view, as before.
  return !own.empty() && !theirs.empty() && theirs != own;
}

void KeptFiles::read_deleted_libs(model::Profile& profile) {
  // Each kept file whose path no longer leads to it: its libs are read through the descriptor from now on.
  std::unordered_map<std::string, std::string> moved;  // path -> /proc/self/fd/N
  for (const KeptFile& k : kept_) {
    if (k.foreign) continue;  // read through /proc/PID/root from the start, and not deleted
    struct stat st {
    }, fst{};
    if (::stat(k.path.c_str(), &st) == 0 && fstat(k.fd.get(), &fst) == 0 && st.st_ino == fst.st_ino &&
        st.st_dev == fst.st_dev)
      continue;
    moved[k.path] = fd_path(k.fd);
    deleted_read_.push_back(k.path);
  }
  if (moved.empty()) return;
  for (model::Process& proc : profile.processes)
    for (model::Lib& l : proc.libs)
      if (auto it = moved.find(l.path); it != moved.end() && l.read_path.empty()) l.read_path = it->second;
}

std::vector<UniqueFd> KeptFiles::take() {
  std::vector<UniqueFd> out;
  for (KeptFile& k : kept_) out.push_back(std::move(k.fd));
  kept_.clear();
  kept_index_.clear();
  return out;
}

std::vector<UniqueFd> KeptFiles::release_unmapped(const std::function<bool(const std::string&)>& mapped) {
  std::vector<UniqueFd> out;
  std::erase_if(kept_, [&](KeptFile& k) {
    if (mapped(k.path) || mapped(fd_path(k.fd))) return false;
    out.push_back(std::move(k.fd));
    return true;
  });
  if (out.empty()) return out;
  kept_index_.clear();
  for (size_t i = 0; i < kept_.size(); ++i) kept_index_[kept_[i].key] = i;
  return out;
}

}  // namespace fxprof::recorder
