// The table of export formats (exports.h).
#include "sinks/exports.h"

#include <array>

#include "sinks/pprof.h"

namespace fxprof::sinks {
namespace {

Status folded(const model::Profile& p, const std::string& path, const ExportOptions& o) {
  return write_folded(p, path, o.folded);
}

Status pprof(const model::Profile& p, const std::string& path, const ExportOptions& o) {
  if (o.folded.tree.weight != Weight::Samples)
    return Err("pprof carries the heap as sample types of its own (alloc_space, inuse_space...): no --heap");
  return write_pprof(p, path, o.folded.tree.clock);
}

Status svg(const model::Profile& p, const std::string& path, const ExportOptions& o) {
  SvgOptions svg = o.svg;
  svg.tree = o.folded.tree;
  if (svg.tree.weight != Weight::Samples)
    svg.unit = svg.tree.weight == Weight::Allocations ? "blocks" : "bytes";
  return write_flamegraph_svg(p, path, svg);
}

constexpr std::array kFormats{
    ExportFormat{"folded", ".folded",
                 "Brendan Gregg's collapsed stacks (`a;b;c 42`), one line per distinct call path, for\n"
                 "flamegraph.pl, inferno and speedscope",
                 folded},
    ExportFormat{"pprof", ".pb.gz", "gzipped profile.proto for go tool pprof, Pyroscope, Parca, Grafana",
                 pprof},
    ExportFormat{"svg", ".svg", "an interactive flame graph in one self-contained SVG file", svg},
};

}  // namespace

std::span<const ExportFormat> export_formats() { return kFormats; }

const ExportFormat* find_export_format(std::string_view name) {
  for (const ExportFormat& f : kFormats)
    if (f.name == name) return &f;
  return nullptr;
}

std::string export_format_names() {
  std::string s;
  for (size_t i = 0; i < kFormats.size(); ++i) {
    if (i > 0) s += i + 1 == kFormats.size() ? " or " : ", ";
    s += kFormats[i].name;
  }
  return s;
}

}  // namespace fxprof::sinks
