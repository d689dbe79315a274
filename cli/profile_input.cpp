#include "cli/profile_input.h"

#include "gecko/gecko_reader.h"
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
  return profile;
}

}  // namespace fxprof::cli
