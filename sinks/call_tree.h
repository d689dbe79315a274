// fxprof sinks: a function-level call tree built from the model, the common ground of the folded, SVG,
// report and diff sinks.
//
// The model interns stacks of frames (addresses); these sinks want stacks of functions. The tree merges
// every stack that names the same functions in the same order, so folded output has exactly one line per
// distinct call path and a flame graph one box per (path, function). It is built in one pass over the
// samples: each sample costs one array lookup (the node of its stack, memoized per thread group because the
// stack table is topological: a prefix is resolved before its stack) and two additions. No string is made
// per sample or per stack; a 100k-sample profile builds in a few milliseconds.
//
// Options pick what a path is: inlined functions kept as their own frames or folded into the function they
// were inlined into, and optional root frames naming the process ("name (pid)") and thread ("name (tid)").
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/profile.h"
#include "sinks/functions.h"

namespace fxprof::sinks {

// What a node counts: samples (the default), or the heap's allocation rows (record --heap) weighed by their
// bytes, by their blocks, or by the bytes of blocks never freed (leaked: still allocated at the end).
enum class Weight : uint8_t { Samples, AllocatedBytes, Allocations, LeakedBytes };

struct TreeOptions {
  bool inlined = true;              // inlined functions as their own frames (else merged into their caller)
  bool process_roots = false;       // a root frame per process: "name (pid N)"
  bool thread_roots = false;        // a root frame per thread: "name (tid N)"
  Clock clock = Clock::Cpu;         // which samples count (functions.h): on-CPU ones unless asked
  Weight weight = Weight::Samples;  // with a heap weight `clock` does not apply: allocations have no clock
  // Which threads to count; empty = all. Arguments: process index, thread index.
  std::function<bool(size_t, size_t)> select;
};

class CallTree {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    uint32_t parent = kNone;
    FunctionId function = 0;                     // meaningless for the root (node 0)
    bool inlined = false;                        // reached as an inlined function on some path
    uint32_t depth = 0;                          // root 0, its children 1, ...
    uint64_t self = 0, total = 0;                // samples (or the heap weight's bytes or blocks)
    uint64_t self_cpu_ns = 0, total_cpu_ns = 0;  // CPU time (samples with an unknown delta add nothing)
  };

  static CallTree build(const model::Profile& profile, FunctionTable& functions, const TreeOptions& options);

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(uint32_t i) const { return nodes_[i]; }
  // Children of a node, sorted by function name (as flamegraph.pl orders them).
  std::span<const uint32_t> children(uint32_t n) const {
    return {children_.data() + child_begin_[n], child_begin_[n + 1] - child_begin_[n]};
  }
  uint64_t total_samples() const { return nodes_[0].total; }
  uint64_t samples_without_stack() const { return no_stack_; }

  // Per-function self and total under `root` (a function that recurs counts once per sample in its total).
  struct FunctionStat {
    FunctionId function = 0;
    uint64_t self = 0, total = 0;
    uint64_t self_cpu_ns = 0, total_cpu_ns = 0;
  };
  std::vector<FunctionStat> function_stats(uint32_t root = 0) const;

  // Depth-first walk under `root` (root excluded) in children order: enter(node) then leave(node).
  template <class Enter, class Leave>
  void walk(uint32_t root, Enter&& enter, Leave&& leave) const {
    std::vector<std::pair<uint32_t, uint32_t>> stack;  // node, next child index
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      auto kids = children(n);
      if (next < kids.size()) {
        uint32_t c = kids[next++];
        enter(c);
        stack.emplace_back(c, 0);
      } else {
        if (n != root) leave(n);
        stack.pop_back();
      }
    }
  }

 private:
  void add_allocations(const model::Thread& th, Weight weight,
                       const std::function<uint32_t(model::StackId)>& node_of_stack);
  // build's passes after the samples: totals bottom-up, then the children lists.
  void sum_totals();
  void link_children(const FunctionTable& functions);

  std::vector<Node> nodes_;
  std::vector<uint32_t>
      child_begin_;  // CSR: children of n are children_[child_begin_[n] .. child_begin_[n+1])
  std::vector<uint32_t> children_;
  uint64_t no_stack_ = 0;
};

}  // namespace fxprof::sinks
