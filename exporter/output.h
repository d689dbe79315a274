// fxprof exporter: where a sink's bytes go. "-" is standard output (for pipes: `fxprof export folded IN -o -
// | flamegraph.pl`); any other path is an OutputFile (temporary file renamed on success, gzip for ".gz").
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "exporter/json_writer.h"

namespace fxprof::exporter {

Result<std::unique_ptr<OutputFile>> open_output(const std::string& path);

// The default output of a format for input IN: IN without .json/.json.gz, plus `extension` (".svg").
std::string output_beside(const std::string& in, const std::string& extension);

}  // namespace fxprof::exporter
