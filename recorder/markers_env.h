// fxprof recorder: the environment `fxprof record` gives the program it launches so that its markers reach
// the profile: FXPROF_MARKERS, a private folder (mode 0700, removed afterwards) where
// include/fxprof/markers.h, markers.rs and the NVTX/ITT injection library write their marker files
// (recorder/markers.h reads them). Set in fxprof's own environment while it lives (the launched program and
// what it starts inherit it), then restored.
#pragma once

#include <optional>
#include <string>

#include "base/temp_dir.h"

namespace fxprof::recorder {

inline constexpr const char* kMarkersEnv = "FXPROF_MARKERS";

class MarkerEnvironment {
 public:
  MarkerEnvironment();
  ~MarkerEnvironment();
  MarkerEnvironment(const MarkerEnvironment&) = delete;
  MarkerEnvironment& operator=(const MarkerEnvironment&) = delete;
  // The folder ("" when it could not be made: then nothing is set, and the program writes no markers).
  const std::string& folder() const { return folder_.path(); }

 private:
  TempFolder folder_;
  std::optional<std::string> old_;
};

}  // namespace fxprof::recorder
