#include "base/temp_dir.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

namespace fxprof {

std::string temp_parent(bool runtime) {
  for (const char* var : {runtime ? "XDG_RUNTIME_DIR" : "TMPDIR", "TMPDIR"}) {
    const char* v = std::getenv(var);
    struct stat st {};
    if (v && *v == '/' && ::stat(v, &st) == 0 && S_ISDIR(st.st_mode)) return v;
  }
  return "/tmp";
}

TempFolder::TempFolder(const std::string& prefix, const std::string& parent) {
  std::string pattern = parent + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data())) path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace fxprof
