// fxprof sinks: the file formats a profile is exported to, one row each. `fxprof export FORMAT` and `record
// --export FORMAT` take their names, default file names, help text and writers from this table only: a new
// sink is its own file and a row in exports.cpp.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/profile.h"
#include "sinks/flamegraph_svg.h"
#include "sinks/folded.h"

namespace fxprof::sinks {

// The export command's options, for the formats that read them (record --export writes with the defaults).
struct ExportOptions {
  FoldedOptions folded;  // folded and svg: the tree's shape (svg.tree is set from folded.tree)
  SvgOptions svg;
};

struct ExportFormat {
  std::string_view name;       // "folded": the FORMAT word
  std::string_view extension;  // ".folded": the default output is the profile's name with it
  std::string_view help;       // `fxprof export --help`'s line(s) after the name
  Status (*write)(const model::Profile& profile, const std::string& path, const ExportOptions& options);
};

std::span<const ExportFormat> export_formats();
const ExportFormat* find_export_format(std::string_view name);  // nullptr: no such format
std::string export_format_names();                              // "folded, pprof or svg"

}  // namespace fxprof::sinks
