// The launched program's marker environment (markers_env.h).
#include "recorder/markers_env.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

namespace fxprof::recorder {

namespace {

std::string inject_library() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  std::string dir(exe, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  return dir + "/libfxprof_inject.so";
}

}  // namespace

MarkerEnvironment::MarkerEnvironment(std::string inject) : folder_("fxprof-markers") {
  if (folder_.path().empty()) return;
  if (const char* old = getenv(kMarkersEnv)) old_ = old;
  setenv(kMarkersEnv, folder_.path().c_str(), 1);
  if (inject.empty()) inject = inject_library();
  if (inject.empty() || access(inject.c_str(), R_OK) != 0) {
    notes_.push_back("NVTX and ITT ranges are not recorded: the injection library " +
                     (inject.empty() ? std::string("libfxprof_inject.so") : inject) +
                     " is missing (it is built and installed next to fxprof)");
    return;
  }
  for (const char* var : {kNvtxEnv, kIttEnv}) {
    if (const char* theirs = getenv(var); theirs && *theirs) {
      notes_.push_back(std::string(var) + " is already set (" + theirs + "): the program's " +
                       (var == kNvtxEnv ? "NVTX" : "ITT") +
                       " calls go to that tool, not to fxprof's markers");
      continue;
    }
    setenv(var, inject.c_str(), 1);
    set_.push_back(var);
  }
}

MarkerEnvironment::~MarkerEnvironment() {
  if (folder_.path().empty()) return;
  for (const char* var : set_) unsetenv(var);
  if (old_)
    setenv(kMarkersEnv, old_->c_str(), 1);
  else
    unsetenv(kMarkersEnv);
}

}  // namespace fxprof::recorder
