// fxprof command line: `--critical-path` of `report` and `export`: which thread and which interval
// (model/critical_path.h walks them).
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "cli/options.h"
#include "model/critical_path.h"
#include "model/profile.h"

namespace fxprof::cli {

struct CriticalPathOptions {
  bool on = false;
  std::string thread;      // --thread NAME|TID ("" = the first process's main thread)
  std::string time_range;  // --time-range START,END in ms of the recording's timeline
  std::string marker;      // --marker NAME: each interval of the program's NAME markers on that thread
};

// --critical-path, --thread and --time-range (--marker is the command's own marker_option, handed over).
std::vector<Option> critical_path_options(CriticalPathOptions& o);

struct CriticalPaths {
  const model::Process* proc = nullptr;
  const model::Thread* thread = nullptr;
  std::string interval;  // "the whole thread", "marker NAME (N intervals)", "START-END ms"
  std::vector<model::CriticalPath> paths;
};

// The thread's paths over the interval(s) the options ask for; an error names what was not found.
Result<CriticalPaths> critical_paths(model::Profile& p, const CriticalPathOptions& o);

// `p` with one process holding only the synthetic thread "critical path of T" (model::critical_path_thread),
// one sample per sampling interval: what `export --critical-path` writes.
void keep_only_critical_path(model::Profile& p, const CriticalPaths& paths);

}  // namespace fxprof::cli
