// The profile builder's libraries (builder.h): executable mappings (MMAP2 records, /proc/PID/maps) become
// libs, and the mapped files are kept open so that binaries deleted while they run can still be read.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/fd.h"
#include "base/path.h"
#include "elf/elf.h"
#include "recorder/builder.h"
#include "recorder/builder_record.h"

namespace fxprof::recorder {

using internal::Reader;
using internal::trailer;

namespace {

// Where a kept descriptor's file is read while fxprof runs (recorder and symbolizer alike).
std::string fd_path(const UniqueFd& fd) { return "/proc/self/fd/" + std::to_string(fd.get()); }

// A lib for an executable mapping [start, end) whose relative addresses are SVMA - base SVMA
// (elf::Identity::lib_offset gives `offset`).
model::Lib make_lib(uint64_t start, uint64_t end, uint64_t offset, const std::string& path,
                    const elf::Identity& elf) {
  model::Lib lib;
  lib.start = start;
  lib.end = end;
  lib.offset = offset;
  lib.path = path;
  lib.name = base_name(path);
  lib.debug_name = lib.name;
  lib.debug_path = lib.path;
  if (!elf.build_id.empty()) {
    lib.breakpad_id = fxprof::elf::breakpad_id(elf.build_id);
    lib.code_id = fxprof::elf::hex(elf.build_id);
  }
  return lib;
}

}  // namespace

const elf::Identity* ProfileBuilder::elf_for(const std::string& path) {
  auto it = elf_cache_.find(path);
  if (it == elf_cache_.end()) {
    std::optional<elf::Identity> info;
    if (path == "[vdso]")
      info = elf::own_vdso();
    else if (!path.empty() && path[0] == '/')
      info = elf::read_file(path);
    it = elf_cache_.emplace(path, std::move(info)).first;
  }
  return it->second ? &*it->second : nullptr;
}

void ProfileBuilder::add_mapping(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                                 const std::string& path, uint64_t t, uint64_t dev, uint64_t ino) {
  if (path.empty() || (path[0] != '/' && path != "[vdso]")) return;  // no file to name it
  if (jitdump_pid(path) != 0) {  // a JIT runtime announcing its jitdump file: names, not code
    process(pid, t).jitdump = path;
    return;
  }
  const std::string from =
      path[0] == '/' && ino != 0 ? keep_file(pid, start, start + len, path, dev, ino) : path;
  if (unwinder_) unwinder_->on_mmap(pid, start, len, pgoff, path, prot, from);
  const elf::Identity* elf = elf_for(from);
  if (!elf) return;
  model::Process& proc = profile_.processes[process(pid, t).proc];
  for (const model::Lib& l : proc.libs)
    if (l.start == start && l.end == start + len && l.path == path)
      return;  // attach: /proc/maps and MMAP2 overlap
  proc.libs.push_back(make_lib(start, start + len, elf->lib_offset(pgoff, prot), path, *elf));
  if (from != path) proc.libs.back().read_path = from;
}

std::string ProfileBuilder::keep_file(uint32_t pid, uint64_t start, uint64_t end, const std::string& path,
                                      uint64_t dev, uint64_t ino) {
  const std::string key = std::to_string(dev) + ':' + std::to_string(ino);
  // The record's device can differ from what stat() shows through an overlay (containers): only a file on
  // the same device with another inode is taken for a replacement.
  auto same_file = [&](const struct stat& st) { return st.st_ino == ino || st.st_dev != dev; };
  // In a container the path is the container's: a host file there is another file, whatever dev and ino say
  // (an overlay shows another device).
  const bool foreign = other_mount_ns(pid);
  struct stat st {};
  const bool at_path = !foreign && ::stat(path.c_str(), &st) == 0 && same_file(st);
  if (auto it = kept_index_.find(key); it != kept_index_.end())
    return at_path ? path : fd_path(kept_[it->second].fd);
  // A descriptor per distinct binary (tens in a recording); past this many, only deleted ones are kept.
  constexpr size_t kMaxKept = 512;
  if (at_path && kept_.size() >= kMaxKept) return path;
  UniqueFd fd;
  if (at_path) {
    fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
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
  kept_.push_back({std::move(fd), path, foreign});
  return at_path ? path : fd_path(kept_.back().fd);
}

bool ProfileBuilder::other_mount_ns(uint32_t pid) {
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

void ProfileBuilder::read_deleted_libs() {
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
  for (model::Process& proc : profile_.processes)
    for (model::Lib& l : proc.libs)
      if (auto it = moved.find(l.path); it != moved.end() && l.read_path.empty()) l.read_path = it->second;
}

std::vector<UniqueFd> ProfileBuilder::take_kept_files() {
  std::vector<UniqueFd> out;
  for (KeptFile& k : kept_) out.push_back(std::move(k.fd));
  kept_.clear();
  kept_index_.clear();
  return out;
}

void ProfileBuilder::on_mmap2(const std::byte* p, size_t size) {
  Reader r(p + 8, size - 8);
  uint32_t pid, tid;
  r.u32x2(pid, tid);
  uint64_t addr = r.u64(), len = r.u64(), pgoff = r.u64();
  uint32_t maj, min;
  r.u32x2(maj, min);
  const uint64_t ino = r.u64();
  r.u64();  // ino_generation
  uint32_t prot, flags;
  r.u32x2(prot, flags);
  if (!r.ok()) return;
  if (auto pr = procs_.find(pid); pr != procs_.end()) pr->second.exec_unmapped = false;
  if (!(prot & PROT_EXEC)) return;
  std::string path = r.str_before_trailer();
  if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
  if (is_anonymous_code(path)) process(pid, trailer(p, size).time).anon_code.emplace_back(addr, addr + len);
  add_mapping(pid, addr, len, pgoff, prot, path, trailer(p, size).time, makedev(maj, min), ino);
}

}  // namespace fxprof::recorder
