// fxprof recorder: the one table of the binaries a recording maps, shared by the profile builder (a lib's
// build ID and address offset) and the unwinder (its CFI): each binary is opened, mapped and its ELF identity
// parsed once per recording, whoever asks first (before: once by each).
//
// A binary is known by where it is read from (a path, a kept descriptor's /proc/self/fd/N, or "[vdso]") and
// the file found there (device, inode, modification time): a file rebuilt during the recording is a new
// binary. The mapping and its descriptor stay until the binary is evicted: the unwinder reads .eh_frame in
// place, and the builder keeps a duplicate of the descriptor for binaries deleted while they run (no second
// open). A continuous recording (recorder/window.h) evicts, at each window's cut, the binaries no live
// process maps any more (every program a test suite builds would stay mapped for the recording's hour);
// one asked for again is opened again. One thread (the recorder's reading thread) uses a table.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "base/fd.h"
#include "elf/elf.h"

namespace fxprof::recorder {

struct Binary {
  std::string path;  // as opened
  MappedFile file;   // the whole file and its descriptor (nothing for the vDSO or a file that cannot be read)
  std::span<const std::byte> image;       // its bytes (our own vDSO's memory for "[vdso]")
  std::optional<elf::Identity> identity;  // nullopt: not an ELF file
};

// Opens, maps and parses one binary (the table's and the unwinder tests' way in).
std::unique_ptr<Binary> open_binary(const std::string& path);

class Binaries {
 public:
  // The binary read from `path`, opened on the first call for the file there; a path deleted since gives
  // the binary last opened there (its mapping's record and its code are read in turn, and the file may go
  // in between).
  const Binary& get(const std::string& path);
  // The same, for a file the caller stat()ed at `path` just now (no second stat: the agent's
  // per-mapping stats were a tenth of its CPU beside a loop of short programs).
  const Binary& get(const std::string& path, const struct stat& st);
  size_t opened() const { return by_key_.size(); }
  // Unmaps and closes every binary `keep` says no to; a reference get() gave for one is invalid from then
  // on. Returns how many went.
  size_t evict(const std::function<bool(const Binary&)>& keep);
  // The paths the binaries of the table were opened from.
  void for_each_path(const std::function<void(const std::string&)>& f) const;

 private:
  std::unordered_map<std::string, std::unique_ptr<Binary>> by_key_;
  std::unordered_map<std::string, const Binary*> last_at_;  // path -> the binary last opened there
};

}  // namespace fxprof::recorder
