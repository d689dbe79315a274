#include "pipeline/symbolicate.h"

#include <cstdio>
#include <utility>

#include "model/symbols.h"

namespace fxprof::pipeline {

model::Symbol to_model_symbol(symbolizer::SymbolInfo&& info) {
  model::Symbol out;
  if (!info.found || info.function.empty()) return out;
  out.reserve(1 + info.inlines.size());
  // The symbolizer lists inlines innermost first (as /symbolicate/v5 wants); the model wants outermost first.
  out.push_back({info.function, std::move(info.file), info.line});
  for (auto it = info.inlines.rbegin(); it != info.inlines.rend(); ++it)
    out.push_back(
        {it->function.empty() ? info.function : std::move(it->function), std::move(it->file), it->line});
  return out;
}

SymbolicateStats symbolicate(model::Profile& profile, symbolizer::Symbolizer& symbols) {
  SymbolicateStats stats;
  std::vector<model::SymbolRequest> requests = model::symbol_requests(profile);
  for (model::SymbolRequest& r : requests) {
    const model::Binary& b = profile.binaries[r.binary];
    symbols.add_known_lib({b.debug_name, b.breakpad_id, b.name, b.path, b.debug_path, b.code_id, b.arch});
    ++stats.binaries;
    stats.addresses += r.addresses.size();
    auto infos = symbols.lookup(b.debug_name, b.breakpad_id, r.addresses);
    if (!infos || infos->size() != r.addresses.size()) {
      // Pseudo-libraries ([vdso], [heap]...) have no file to read: not worth a warning on every recording.
      const std::string& shown = b.name.empty() ? b.debug_name : b.name;
      if (!shown.empty() && shown[0] != '[')
        std::fprintf(stderr, "fxprof: warning: no symbols for %s: %s\n", shown.c_str(),
                     infos ? "wrong number of results" : infos.error().c_str());
      continue;
    }
    r.answers.reserve(infos->size());
    for (symbolizer::SymbolInfo& info : *infos) {
      r.answers.push_back(to_model_symbol(std::move(info)));
      if (!r.answers.back().empty()) ++stats.resolved;
    }
  }
  model::apply_symbols(profile, requests);
  return stats;
}

}  // namespace fxprof::pipeline
