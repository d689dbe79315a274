// fxprof sinks: an interactive flame graph in one self-contained SVG file (no network, no external script
// or font), in the spirit of flamegraph.pl and inferno: hover shows a frame's details, click zooms into it,
// "Search" highlights matching functions and prints the share of samples they cover, "Reset zoom" and Ctrl+F.
//
// Layout: one box per call-tree node (sinks/call_tree.h), x and width proportional to its samples, its
// children side by side above it (below it with `icicle`), sorted by name. Each box carries its sample count
// and position in samples (data-s, data-x) so the script recomputes layouts on zoom without other data.
// Boxes narrower than `min_width` pixels are left out with their subtrees (flamegraph.pl's 0.1 px default):
// they would be invisible and make big profiles' files huge.
// Colours say the category: user code warm yellow-to-red (hue from the name, so a function keeps its colour),
// kernel orange-brown, inlined functions aqua, labels grey. The differential graph of `fxprof diff` gives
// each box a colour from its change instead (red grew, blue shrank).
#pragma once

#include <functional>
#include <string>

#include "base/result.h"
#include "model/profile.h"
#include "sinks/call_tree.h"
#include "sinks/output.h"

namespace fxprof::sinks {

struct SvgOptions {
  TreeOptions tree;
  bool icicle = false;     // root at the top, callees below
  double width = 1200;     // pixels
  double min_width = 0.1;  // pixels; narrower boxes are left out
  std::string title = "Flame Graph";
  std::string unit = "samples";  // what a box's width counts, in its tooltip (tree.weight: bytes, blocks)
  std::string subtitle;          // e.g. the profile's name; "" for none
  // Differential colouring: for node n, a change in [-1, 1] (positive = grew), or NaN for "new/none".
  std::function<double(uint32_t)> delta;
  std::string detail_suffix_doc;  // appended to the help line (diff: what the colours mean)
  // Extra text for a node's tooltip (diff: "+3.2% of samples").
  std::function<std::string(uint32_t)> extra_details;
};

Status write_flamegraph_svg(const model::Profile& profile, const std::string& path,
                            const SvgOptions& options);

void write_flamegraph_svg(const CallTree& tree, const FunctionTable& functions, const SvgOptions& options,
                          OutputFile& out);

}  // namespace fxprof::sinks
