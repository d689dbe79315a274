// fxprof passes: the glue between sources, the model, the symbolizer and sinks. Every command runs
//   source (recorder, Gecko reader) -> model -> symbolicate(model) -> sink (Gecko writer, later others)
// and this is the one place that connects the model's symbolication API (model/symbols.h) to the
// symbolizer (symbolizer/symbolizer.h): the model says which addresses of which binary its samples use, the
// symbolizer answers with plain data, the model applies it.
//
// Numbers that shaped it: a 23 ms program's self-contained profile used to take 131 ms from the program's
// exit (the file was written, read back, parsed and rewritten); on the model only the ~hundreds of addresses
// the samples use are looked up, once per binary, and the file is written once.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/profile.h"
#include "model/symbols.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::passes {

struct SymbolicateStats {
  size_t binaries = 0;   // binaries asked
  size_t addresses = 0;  // distinct addresses asked
  size_t resolved = 0;   // addresses that got a name
  // Binaries whose debug file (named by their .gnu_debuglink) was not found, newly this time: each is a
  // data-quality entry saying where fxprof looked; the terminal gets missing_debug_line() once.
  std::vector<std::string> no_debug;
};

// "no debug info for libstdc++.so.6.0.30 and python3.11 (named from their symbol tables: no files,
// lines or inlined functions); apt install libstdc++6-dbgsym python3.11-minimal-dbgsym": one line for all
// of `binaries` (paths), the packages from the dpkg lists; "" for none. Commands say it unless -q.
std::string missing_debug_line(const std::vector<std::string>& binaries);

// Names the frames of `profile` in place (inlined functions expanded, files, lines); frames that stay
// unresolved in a known binary become binary-relative. Registers the profile's binaries with `symbols`.
// A binary without symbols gets one warning line on stderr (pseudo-libraries like [vdso] stay quiet); one
// without its debug file is in stats.no_debug.
// Does not set meta.presymbolicated: the caller decides whether the output is baked.
SymbolicateStats symbolicate(model::Profile& profile, symbolizer::Symbolizer& symbols);

// `fxprof symbolicate`: reads the Gecko profile `in`, symbolicates it on the model, writes it baked
// (presymbolicated: true) to `out` (may be `in`: written to a temporary file and renamed). Errors are one
// line naming the file. Warns once per process on stderr that the output holds local paths and command lines.
Status symbolicate_file(const std::string& in, const std::string& out, symbolizer::Symbolizer& symbols);

// The libraries a symbol server must answer for: every mapping with a debugName and breakpadId, once.
std::vector<symbolizer::KnownLib> known_libs(const model::Profile& profile);
// Where the symbolizer finds one mapping's binary, as symbolicate() registers it (an entry registered again
// differently would drop what was loaded).
symbolizer::KnownLib known_lib(const model::Lib& lib);

// Converts one symbolizer answer to the model's plain form (outermost function first).
model::Symbol to_model_symbol(symbolizer::SymbolInfo&& info);

}  // namespace fxprof::passes
