#include "cli/profile_input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "base/fd.h"
#include "base/terminal.h"
#include "gecko/gecko_reader.h"
#include "model/latency.h"
#include "model/markers.h"
#include "passes/passes.h"
#include "perf/data_file.h"
#include "recorder/perf_import.h"
#include "recorder/pprof_import.h"
#include "sinks/heap_report.h"

namespace fxprof::cli {

namespace {

// A perf.data file (its "PERFILE2" magic) is imported as `fxprof import` does, instead of read as a profile.
bool is_perf_data(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  char magic[8] = {};
  return fd.valid() && pread(fd.get(), magic, 8, 0) == 8 && std::memcmp(magic, "PERFILE2", 8) == 0;
}

Result<model::Profile> import_perf(const std::string& path, const InputOptions& options) {
  auto file = perf::DataFile::read(path);
  if (!file) return std::move(file).take_error();
  recorder::ImportOptions o;
  o.symbol_dirs = options.symbols.symbol_dirs;
  auto imported = recorder::import_perf_data(*file, o);
  if (!imported) return Err(path + ": " + imported.error());
  return std::move(imported->profile);
}

// A pprof profile (.pb.gz, .pb) likewise.
Result<model::Profile> import_pprof(const std::string& path) {
  auto imported = recorder::import_pprof_file(path, {});
  if (!imported) return std::move(imported).take_error();
  return std::move(imported->profile);
}

}  // namespace

bool is_imported_input(const std::string& path) {
  return is_perf_data(path) || recorder::is_pprof_file(path);
}

Result<model::Profile> load_profile_for_sinks(const std::string& path, const InputOptions& options,
                                              sinks::Suppressed* suppressed) {
  gecko::ReadInfo info;
  auto profile = is_perf_data(path)              ? import_perf(path, options)
                 : recorder::is_pprof_file(path) ? import_pprof(path)
                                                 : gecko::read_gecko_profile(path, &info);
  if (!profile) return profile;
  if (info.processed)
    return Err(path + ": a processed-format profile (as samply writes); fxprof reads Gecko profiles");
  // The passes `record` runs (passes/passes.h), but for the tracks, which only the Gecko writer wants.
  symbolizer::Symbolizer symbols(options.symbols);
  const passes::Naming naming = options.symbolicate ? passes::Naming::Baked : passes::Naming::Raw;
  const passes::Outcome passed = passes::run(*profile, {&symbols, naming, false});
  if (const std::string line = passes::missing_debug_line(passed.named.no_debug); !line.empty()) say(line);
  if (options.latency) model::keep_latency_samples(*profile);  // before --marker: every thread counts
  if (!options.marker.empty() && model::keep_samples_in_marker(*profile, options.marker) == 0)
    return Err(path + " has no interval marker named '" + options.marker +
               "' (`fxprof report --markers` lists the program's markers)");
  if (!options.suppress.empty()) {
    const sinks::Suppressed s = sinks::suppress_allocations(*profile, options.suppress);
    std::string names;
    for (const std::string& f : options.suppress) names += (names.empty() ? "" : ", ") + f;
    say(path + ": --suppress left out " + std::to_string(s.allocations) + " allocations (" +
        sinks::heap_bytes_text(s.bytes) + ") whose stack contains " + names +
        (s.allocations == 0 ? " (no allocation stack has it: is the name right?)" : ""));
    if (suppressed) *suppressed = s;
  }
  return profile;
}

}  // namespace fxprof::cli
