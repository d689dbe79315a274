// fxprof base: a private temporary folder (mode 0700), removed with its contents. Every temporary file fxprof
// writes is in one.
#pragma once

#include <string>

namespace fxprof {

// Where temporary folders go: $TMPDIR, or /tmp. `runtime`: $XDG_RUNTIME_DIR first (the user's own 0700
// folder, for files whose names others must not guess). Only an absolute path to a folder is taken.
std::string temp_parent(bool runtime = false);

class TempFolder {
 public:
  // `prefix` names the folder ("fxprof-diff" -> /tmp/fxprof-diff-XXXXXX); path() is empty when it failed
  // (errno says why).
  explicit TempFolder(const std::string& prefix, const std::string& parent = temp_parent());
  ~TempFolder();
  TempFolder(TempFolder&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempFolder& operator=(TempFolder&&) = delete;
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace fxprof
