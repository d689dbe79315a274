// fxprof recorder: the environment `fxprof record` gives the program it launches so that its markers reach
// the profile: FXPROF_MARKERS, a private folder (mode 0700, removed afterwards) where
// include/fxprof/markers.h, markers.rs and the NVTX/ITT injection library write their marker files
// (recorder/markers.h reads them); NVTX_INJECTION64_PATH and INTEL_LIBITTNOTIFY64, the injection library
// (libfxprof_inject.so next to the fxprof binary, inject/inject.h) that NVTX's and ITT's clients load, unless
// the user set them already (their tool is kept: notes() says so). Set in fxprof's own environment while it
// lives (the launched program and what it starts inherit it), then restored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/temp_dir.h"

namespace fxprof::recorder {

inline constexpr const char* kMarkersEnv = "FXPROF_MARKERS";
inline constexpr const char* kNvtxEnv = "NVTX_INJECTION64_PATH";
inline constexpr const char* kIttEnv = "INTEL_LIBITTNOTIFY64";

class MarkerEnvironment {
 public:
  // `inject`: the injection library's path ("" = libfxprof_inject.so next to /proc/self/exe).
  explicit MarkerEnvironment(std::string inject = "");
  ~MarkerEnvironment();
  MarkerEnvironment(const MarkerEnvironment&) = delete;
  MarkerEnvironment& operator=(const MarkerEnvironment&) = delete;
  // The folder ("" when it could not be made: then nothing is set, and the program writes no markers).
  const std::string& folder() const { return folder_.path(); }
  // What the user should know: a variable of theirs kept, the library missing (one line each).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  TempFolder folder_;
  std::optional<std::string> old_;
  std::vector<const char*> set_;  // the injection variables we set (unset again at the end)
  std::vector<std::string> notes_;
};

}  // namespace fxprof::recorder
