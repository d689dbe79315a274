// fxprof passes: a baked profile made servable again. The Firefox Profiler takes a baked frame's name as it
// is: with no address, it asks for no source, no assembly and no inlined functions. `fxprof load` therefore
// turns the frames of every binary still on disk as recorded (same build ID) back into the addresses a
// --no-symbolicate recording has, which the front end then symbolicates through our server; the others keep
// their saved names, and the caller says which and why.
#pragma once

#include <string>
#include <vector>

#include "model/profile.h"

namespace fxprof::passes {

struct UnbakeResult {
  size_t binaries = 0;               // binaries whose frames became addresses again
  std::vector<std::string> missing;  // "NAME (why)" of the binaries whose frames keep their saved names
};

// Rewrites, per process, the named frames of binaries found on disk (path and build ID as recorded; the
// vDSO: ours, when its build ID is the recorded one) into absolute addresses in that process; an inlined
// chain becomes its one address again. Frames of other binaries are left as they are. When some frames
// changed, the profile is no longer presymbolicated (the front end symbolicates only profiles that are not).
UnbakeResult unbake(model::Profile& profile);

// One line for the terminal about `r.missing`, or "" when nothing is.
std::string unbake_line(const UnbakeResult& r);

}  // namespace fxprof::passes
