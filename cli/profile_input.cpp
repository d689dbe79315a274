#include "cli/profile_input.h"

#include "gecko/gecko_reader.h"
#include "model/markers.h"
#include "pipeline/symbolicate.h"

namespace fxprof::cli {

Result<model::Profile> load_profile_for_sinks(const std::string& path, const InputOptions& options) {
  gecko::ReadInfo info;
  auto profile = gecko::read_gecko_profile(path, &info);
  if (!profile) return profile;
  if (info.processed)
    return Err(path + ": a processed-format profile (as samply writes); fxprof reads Gecko profiles");
  if (options.symbolicate) {
    symbolizer::Symbolizer symbols(options.symbols);
    pipeline::symbolicate(*profile, symbols);
  }
  if (!options.marker.empty() && model::keep_samples_in_marker(*profile, options.marker) == 0)
    return Err(path + " has no interval marker named '" + options.marker +
               "' (`fxprof report --markers` lists the program's markers)");
  return profile;
}

}  // namespace fxprof::cli
