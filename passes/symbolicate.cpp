#include "passes/symbolicate.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <unordered_set>
#include <utility>

#include "base/terminal.h"
#include "gecko/gecko.h"
#include "gecko/gecko_reader.h"
#include "model/symbols.h"
#include "passes/passes.h"
#include "symbolizer/debug_packages.h"

namespace fxprof::passes {
namespace {

// Frames named so by an earlier symbolication (a profile symbolicated at record time, read back) are asked
// again: symbols may be there now (--symbol-dir, a debug package installed since). Unnames them and
// returns their names by (binary, address), for the ones that stay unresolved to get back.
using FdeNames = std::map<std::pair<model::BinaryId, uint64_t>, model::StringId>;
FdeNames unname_fde_frames(model::Profile& profile) {
  FdeNames names;
  for (size_t i = 0; i < profile.frames.size(); ++i) {
    model::Frame& f = profile.frames.mutable_frame(static_cast<model::FrameId>(i));
    if (f.kind != model::FrameKind::Native || f.binary == model::kNoBinary || f.name == model::kNoString ||
        f.inline_depth != 0 || f.file != model::kNoString)
      continue;
    if (!symbolizer::is_fde_function_name(profile.strings.get(f.name), profile.binaries[f.binary].debug_name))
      continue;
    names.emplace(std::pair(f.binary, f.address), f.name);
    f.name = model::kNoString;
  }
  return names;
}

void rename_unresolved(model::Profile& profile, const FdeNames& names) {
  if (names.empty()) return;
  for (size_t i = 0; i < profile.frames.size(); ++i) {
    model::Frame& f = profile.frames.mutable_frame(static_cast<model::FrameId>(i));
    if (f.kind != model::FrameKind::Native || f.binary == model::kNoBinary || f.name != model::kNoString)
      continue;
    if (auto it = names.find({f.binary, f.address}); it != names.end()) f.name = it->second;
  }
}

// A binary deleted while it ran is read through the recorder's descriptor (Lib::read_path); model::Binary
// carries the same fields as the Lib it came from.
template <class LibOrBinary>
symbolizer::KnownLib known_lib_of(const LibOrBinary& l) {
  const std::string& path = l.read_path.empty() ? l.path : l.read_path;
  const std::string& debug_path = l.read_path.empty() ? l.debug_path : l.read_path;
  return {l.debug_name, l.breakpad_id, l.name, path, debug_path, l.code_id, l.arch};
}

}  // namespace

symbolizer::KnownLib known_lib(const model::Lib& lib) { return known_lib_of(lib); }

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
  const FdeNames fde_names = unname_fde_frames(profile);
  std::vector<model::SymbolRequest> requests = model::symbol_requests(profile);
  for (model::SymbolRequest& r : requests) {
    const model::Binary& b = profile.binaries[r.binary];
    symbols.add_known_lib(known_lib_of(b));
    ++stats.binaries;
    stats.addresses += r.addresses.size();
    auto infos = symbols.lookup(b.debug_name, b.breakpad_id, r.addresses);
    if (!infos || infos->size() != r.addresses.size()) {
      // Pseudo-libraries ([vdso], [heap]...) have no file to read: not worth a warning on every recording.
      const std::string& shown = b.name.empty() ? b.debug_name : b.name;
      if (!shown.empty() && shown[0] != '[')
        say("warning: no symbols for " + shown + ": " +
            (infos ? std::string("wrong number of results") : infos.error()));
      continue;
    }
    // Debug files the binary names that are not there: one data-quality entry each (once per profile: a
    // profile symbolicated again keeps its entries), and the binary for the caller's one line.
    // Other entries (a dwz or split DWARF file not found, debug info not read under `ulimit -v`) are not
    // a package to install: each keeps its own line.
    bool missing = false;
    for (symbolizer::MissingFile& m : symbols.missing_files(b.debug_name, b.breakpad_id)) {
      if (!profile.meta.add_problem({m.text, 1})) continue;
      if (m.kind == symbolizer::MissingFile::Kind::DebugLink)
        missing = true;
      else
        say(m.text);
    }
    if (missing) stats.no_debug.push_back(b.path.empty() ? b.name : b.path);
    r.answers.reserve(infos->size());
    for (symbolizer::SymbolInfo& info : *infos) {
      r.answers.push_back(to_model_symbol(std::move(info)));
      if (!r.answers.back().empty()) ++stats.resolved;
    }
  }
  model::apply_symbols(profile, requests);
  rename_unresolved(profile, fde_names);
  return stats;
}

std::string missing_debug_line(const std::vector<std::string>& binaries) {
  if (binaries.empty()) return "";
  std::string names;
  constexpr size_t kShown = 3;
  for (size_t i = 0; i < binaries.size() && i < kShown; ++i) {
    if (i > 0) names += i + 1 == binaries.size() ? " and " : ", ";
    names += binaries[i].substr(binaries[i].rfind('/') + 1);
  }
  if (binaries.size() > kShown) names += " and " + std::to_string(binaries.size() - kShown) + " more";
  std::string line =
      "no debug info for " + names + " (named from symbol tables: no files, lines or inlined functions)";
  const std::vector<std::string> packages = symbolizer::debug_packages(binaries);
  if (!packages.empty()) {
    line += "; apt install";
    for (const std::string& p : packages) line += " " + p;
  }
  return line;
}

std::vector<symbolizer::KnownLib> known_libs(const model::Profile& profile) {
  std::vector<symbolizer::KnownLib> out;
  std::unordered_set<std::string> seen;
  for (const model::Process& proc : profile.processes) {
    for (const model::Lib& l : proc.libs) {
      if (l.debug_name.empty() || l.breakpad_id.empty()) continue;  // never requested by the front end
      if (!seen.insert(l.debug_name + '\n' + l.breakpad_id).second) continue;
      out.push_back(known_lib_of(l));
    }
  }
  return out;
}

Status symbolicate_file(const std::string& in, const std::string& out, symbolizer::Symbolizer& symbols) {
  gecko::ReadInfo info;
  info.keep_tracks = true;
  auto profile = gecko::read_gecko_profile(in, &info);
  if (!profile) return Err(profile.error());
  if (info.processed)
    return Err(in +
               ": a processed-format profile; only Gecko profiles (what fxprof writes) can be symbolicated");
  // The passes `record` runs, baked, the file's tracks kept and renamed (or the critical-path tracks made).
  const Outcome passed = run(*profile, with_tracks(*profile, info.tracks, {&symbols, Naming::Baked, true}));
  if (const std::string line = missing_debug_line(passed.named.no_debug); !line.empty()) say(line);
  profile->meta.presymbolicated = true;
  if (auto s = gecko::write_gecko_profile(*profile, out, passed.tracks); !s) return s;
  bool local_paths = false;
  for (const model::Process& proc : profile->processes)
    for (const model::Lib& l : proc.libs) local_paths |= !l.path.empty() && l.path[0] == '/';
  static std::atomic<bool> warned{false};
  if (local_paths && !warned.exchange(true)) {
    std::fprintf(
        stderr,
        "fxprof: note: %s holds full local paths (of the program and its libraries) and the recorded\n"
        "        command lines; check that you may share them before uploading it.\n",
        out.c_str());
  }
  return {};
}

}  // namespace fxprof::passes
