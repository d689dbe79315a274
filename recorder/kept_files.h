// fxprof recorder internals: descriptors of the mapped binaries, kept so that a binary deleted (or replaced)
// while it runs can still be read: by the unwinder now, by the symbolizer after the recording (the
// descriptors go with the Recording; the libs get a read_path through them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/fd.h"
#include "model/profile.h"
#include "recorder/unwind/binaries.h"

namespace fxprof::recorder {

class KeptFiles {
 public:
  // Files at their path are opened by `binaries` (the recording's table), whose descriptor is duplicated.
  explicit KeptFiles(Binaries& binaries) : binaries_(binaries) {}

  // Keeps a descriptor of the file mapped at [start, end) of `pid`, known by `dev`/`ino` (MMAP2,
  // /proc/PID/maps). Returns where to read it now: `path` when the file there is the mapped one, else
  // /proc/self/fd/N of a descriptor opened through /proc/PID/map_files (or /proc/PID/exe); `path` and an
  // entry in unreadable() when neither works. A process in another mount namespace (a container) is always
  // read through /proc/PID/root.
  // `binary`, when given, gets the binary at the returned path if keep() looked it up (else nullptr), so
  // that the caller need not stat the file again.
  std::string keep(uint32_t pid, uint64_t start, uint64_t end, const std::string& path, uint64_t dev,
                   uint64_t ino, const Binary** binary = nullptr);
  // Keeps a descriptor of the executable `pid` runs now (/proc/PID/exe), taken right after a launched
  // program's exec: its MMAP2 record may be read after the program ended and its file was deleted or
  // replaced (a rebuild while it runs), when neither the path nor /proc/PID/map_files leads to it any more.
  void keep_executable(uint32_t pid);
  // At the end: each kept file whose path no longer leads to it (deleted, replaced) gives its libs a
  // read_path through its descriptor, and is listed in deleted_read().
  void read_deleted_libs(model::Profile& profile);
  // The descriptors, for the recording (the read_paths name them).
  std::vector<UniqueFd> take();
  // A continuous recording's cut (recorder/window.h): the descriptors of files no live process maps any
  // more (`mapped` false for their path and for their /proc/self/fd/N) are no longer kept; returned, for
  // the window whose libs may still be read through them.
  std::vector<UniqueFd> release_unmapped(const std::function<bool(const std::string&)>& mapped);
  size_t kept() const { return kept_.size(); }

  const std::vector<std::string>& deleted_read() const { return deleted_read_; }
  const std::vector<std::string>& unreadable() const { return unreadable_; }

  // Whether `pid` sees another file system than fxprof (its own mount namespace: a container, unshare -m).
  static bool other_mount_ns(uint32_t pid);

 private:
  struct KeptFile {
    UniqueFd fd;
    std::string path;      // the mapping's path
    bool foreign = false;  // read through /proc/PID/root: its path means nothing here
    std::string key;       // "dev:ino" (kept_index_)
  };
  Binaries& binaries_;
  std::vector<KeptFile> kept_;
  std::unordered_map<std::string, size_t> kept_index_;  // "dev:ino" -> kept_
  std::vector<std::string> deleted_read_, unreadable_;
};

}  // namespace fxprof::recorder
