// fxprof sinks: where a sink's bytes go: an OutputFile over base/fd.h's AtomicFile, which decides what a
// path means ("-" is standard output, for pipes: `fxprof export folded IN -o - | flamegraph.pl`; a device or
// FIFO is a stream; a regular file or a new name is replaced atomically; a directory is refused), or over a
// string in memory (the body `record --share` and `--push` upload, made from the model they recorded rather
// than read back from the file they wrote). JSON sinks write through base/json_writer.h's JsonWriter over an
// OutputFile.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/json_writer.h"
#include "base/result.h"

namespace fxprof::sinks {

// Where bytes go: a temporary file beside the target (renamed on finish()) or a stream, gzip-compressed when
// the target name ends in ".gz". Nothing appears under a replaced file's name unless finish() succeeds.
class OutputFile : public ByteSink {
 public:
  static Result<std::unique_ptr<OutputFile>> create(const std::string& path);
  // Appends to `bytes` (which must outlive it), gzip-compressed when `gzip`: the bytes a file would get.
  static std::unique_ptr<OutputFile> in_memory(std::string& bytes, bool gzip);
  void write(std::string_view bytes) override = 0;  // errors are remembered and reported by finish()
  virtual Status finish() = 0;                      // flush, close, rename
};

Result<std::unique_ptr<OutputFile>> open_output(const std::string& path);

// The default output of a format for input IN: IN without .json/.json.gz, plus `extension` (".svg").
std::string output_beside(const std::string& in, const std::string& extension);

}  // namespace fxprof::sinks
