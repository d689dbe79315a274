// fxprof sinks: Brendan Gregg's collapsed ("folded") stacks, `root;caller;callee 42`, one line per
// distinct call path with its sample count; what flamegraph.pl, inferno and speedscope read.
//
// Written from the function-level call tree (sinks/call_tree.h): a depth-first walk keeps one growing path
// buffer and prints a line for every node with self samples, so the output has exactly one line per distinct
// path, lines in flamegraph.pl's sorted order, and no string is built per sample. Names are made safe for
// the format: ';' (the frame separator) becomes ':', line breaks become spaces. With `annotate`, kernel and
// inlined frames get inferno's "_[k]" and "_[i]" suffixes (flamegraph.pl colours them).
#pragma once

#include <string>

#include "base/result.h"
#include "model/profile.h"
#include "sinks/call_tree.h"
#include "sinks/output.h"

namespace fxprof::sinks {

struct FoldedOptions {
  TreeOptions tree;
  bool annotate = false;  // "_[k]" after kernel frames, "_[i]" after inlined ones
};

// Writes `profile` as folded stacks to `path` ("-": standard output; gzip when it ends in ".gz").
Status write_folded(const model::Profile& profile, const std::string& path, const FoldedOptions& options);

// The same into `out`, from an existing tree.
void write_folded(const CallTree& tree, const FunctionTable& functions, bool annotate, OutputFile& out);

}  // namespace fxprof::sinks
