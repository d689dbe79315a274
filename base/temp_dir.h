// fxprof base: a private temporary folder (mode 0700, under $TMPDIR or /tmp), removed with its contents.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace fxprof {

class TempFolder {
 public:
  // `prefix` names the folder ("fxprof-diff" -> /tmp/fxprof-diff-XXXXXX); path() is empty when it failed.
  explicit TempFolder(const std::string& prefix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace fxprof
