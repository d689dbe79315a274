// fxprof command line: the source side of the sink commands (export, report, diff): read a saved profile
// into the model and symbolicate it on the model with the symbol options of `load` (--symbol-dir), so
// every sink sees function names, files, lines and inlined functions.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "model/profile.h"
#include "sinks/heap_diff.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::cli {

struct InputOptions {
  symbolizer::Options symbols;
  bool symbolicate = true;            // false with --no-symbolicate: addresses stay "lib+0xoffset"
  std::string marker;                 // --marker NAME: only the samples inside the program's NAME markers
  bool latency = false;               // --latency: samples weighted by 1/(threads running), model/latency.h
  std::vector<std::string> suppress;  // --suppress FUNC: allocations whose stack contains FUNC left out
};

// With options.suppress, the heap's rows whose stack contains one of its functions are left out, and a line
// says how many (sinks/heap_diff.h); `suppressed` (if given) gets the figures.
Result<model::Profile> load_profile_for_sinks(const std::string& path, const InputOptions& options,
                                              sinks::Suppressed* suppressed = nullptr);

// A perf.data file or a pprof profile: imported into the model (as `fxprof import` does), not read as a
// Gecko profile.
bool is_imported_input(const std::string& path);

}  // namespace fxprof::cli
