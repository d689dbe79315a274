// The launched program's marker environment (markers_env.h).
#include "recorder/markers_env.h"

#include <stdlib.h>

namespace fxprof::recorder {

MarkerEnvironment::MarkerEnvironment() : folder_("fxprof-markers") {
  if (folder_.path().empty()) return;
  if (const char* old = getenv(kMarkersEnv)) old_ = old;
  setenv(kMarkersEnv, folder_.path().c_str(), 1);
}

MarkerEnvironment::~MarkerEnvironment() {
  if (folder_.path().empty()) return;
  if (old_)
    setenv(kMarkersEnv, old_->c_str(), 1);
  else
    unsetenv(kMarkersEnv);
}

}  // namespace fxprof::recorder
