// fxprof exporter: where a sink's bytes go. "-" is standard output (for pipes: `fxprof export folded IN -o -
// | flamegraph.pl`); any other path is an OutputFile (temporary file renamed on success, gzip for ".gz").
// JSON sinks write through base/json_writer.h's JsonWriter over an OutputFile.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/json_writer.h"
#include "base/result.h"

namespace fxprof::exporter {

// Where bytes go: a temporary file beside the target (renamed on finish()), gzip-compressed when the target
// name ends in ".gz". Nothing appears under the final name unless finish() succeeds.
class OutputFile : public ByteSink {
 public:
  static Result<std::unique_ptr<OutputFile>> create(const std::string& path);
  void write(std::string_view bytes) override = 0;  // errors are remembered and reported by finish()
  virtual Status finish() = 0;                      // flush, close, rename
};

Result<std::unique_ptr<OutputFile>> open_output(const std::string& path);

// The default output of a format for input IN: IN without .json/.json.gz, plus `extension` (".svg").
std::string output_beside(const std::string& in, const std::string& extension);

}  // namespace fxprof::exporter
