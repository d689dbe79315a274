#include "sinks/call_tree.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace fxprof::sinks {

namespace {

// The children index: (parent, function) -> node, open addressing over the node ids themselves (kNone =
// free), the key read back from the nodes: 4 bytes a slot, at most 3/4 full, so 5-11 bytes per node where a
// std::unordered_map of (parent << 32 | function) -> node took ~40 (a node, a bucket and malloc's header).
// A profile has up to one node per distinct stack (637k in a 2-minute 8-thread one).
class ChildIndex {
 public:
  explicit ChildIndex(std::vector<CallTree::Node>& nodes) : nodes_(nodes), slots_(1024, CallTree::kNone) {}

  uint32_t child(uint32_t parent, FunctionId f, bool inlined) {
    size_t i = slot_of(parent, f);
    if (slots_[i] != CallTree::kNone) {
      nodes_[slots_[i]].inlined |= inlined;
      return slots_[i];
    }
    CallTree::Node n;
    n.parent = parent;
    n.function = f;
    n.inlined = inlined;
    n.depth = nodes_[parent].depth + 1;
    const auto id = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(n);
    slots_[i] = id;
    if (nodes_.size() * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
    return id;
  }
  void release() { std::vector<uint32_t>().swap(slots_); }  // once the tree is built

 private:
  static size_t hash(uint32_t parent, FunctionId f) {
    uint64_t h = ((static_cast<uint64_t>(parent) << 32) | f) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h ^ (h >> 32));  // the high half depends on every bit of the key
  }
  // The slot holding (parent, f), or the free slot where it goes.
  size_t slot_of(uint32_t parent, FunctionId f) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(parent, f) & mask;; i = (i + 1) & mask) {
      const uint32_t id = slots_[i];
      if (id == CallTree::kNone || (nodes_[id].parent == parent && nodes_[id].function == f)) return i;
    }
  }
  void rehash(size_t n) {
    slots_.assign(n, CallTree::kNone);
    for (uint32_t id = 1; id < nodes_.size(); ++id)
      slots_[slot_of(nodes_[id].parent, nodes_[id].function)] = id;
  }

  std::vector<CallTree::Node>& nodes_;
  std::vector<uint32_t> slots_;  // a power of two
};

}  // namespace

CallTree CallTree::build(const model::Profile& profile, FunctionTable& functions,
                         const TreeOptions& options) {
  CallTree t;
  t.nodes_.emplace_back();  // the root
  ChildIndex index(t.nodes_);
  auto child = [&](uint32_t parent, FunctionId f, bool inlined) { return index.child(parent, f, inlined); };

  // node_of[stack] is valid when stamp[stack] == the current group (a group = one root node).
  const size_t nstacks = profile.stacks.size();
  std::vector<uint32_t> node_of(nstacks, 0), stamp(nstacks, 0);
  uint32_t group = 0, group_root = kNone;
  size_t group_process = SIZE_MAX;
  std::vector<model::StackId> chain;
  const OffCpuFrames off(profile);

  for (size_t pi = 0; pi < profile.processes.size(); ++pi) {
    const model::Process& proc = profile.processes[pi];
    uint32_t proc_root = 0;
    bool proc_used = false;
    for (size_t ti = 0; ti < proc.threads.size(); ++ti) {
      if (options.select && !options.select(pi, ti)) continue;
      const model::Thread& th = proc.threads[ti];
      if (!proc_used) {
        proc_used = true;
        if (options.process_roots)
          proc_root = child(0, functions.label(proc.name + " (pid " + std::to_string(proc.pid) + ")"), false);
      }
      uint32_t root = proc_root;
      if (options.thread_roots)
        root = child(proc_root, functions.label(th.name + " (tid " + std::to_string(th.tid) + ")"), false);
      if (root != group_root || pi != group_process) {  // the memo is per root node and process
        ++group;
        group_root = root;
        group_process = pi;
      }
      // The node of `stack` under this group's root: memoized, walking up to a resolved prefix (or the
      // root), then resolving back down.
      auto node_of_stack = [&](model::StackId stack) {
        if (stamp[stack] == group) return node_of[stack];
        chain.clear();
        model::StackId st = stack;
        while (st != model::kNoStack && stamp[st] != group) {
          chain.push_back(st);
          st = profile.stacks.prefix(st);
        }
        uint32_t n = st == model::kNoStack ? root : node_of[st];
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          for (const FrameLine& l : functions.lines(pi, profile.stacks.frame(*it))) {
            if (l.inlined && !options.inlined) continue;
            n = child(n, l.function, l.inlined);
          }
          node_of[*it] = n;
          stamp[*it] = group;
        }
        return n;
      };
      if (options.weight != Weight::Samples) {
        t.add_allocations(th, options.weight, node_of_stack);
        continue;
      }
      for (const model::Sample& s : th.samples) {
        if (s.stack == model::kNoStack) {
          ++t.no_stack_;
          continue;
        }
        if (!off.counts(s.stack, options.clock)) continue;
        Node& node = t.nodes_[node_of_stack(s.stack)];
        ++node.self;
        if (s.cpu_delta_ns > 0) node.self_cpu_ns += static_cast<uint64_t>(s.cpu_delta_ns);
      }
    }
  }

  index.release();
  t.sum_totals();
  t.link_children(functions);
  return t;
}

// The heap's rows of one thread: a row with bytes > 0 is `count` blocks allocated at its stack, one with
// bytes < 0 the free of the row with its address tag (heap/source.cpp), so a block is leaked when no free
// row has its tag (as the heap report counts it).
void CallTree::add_allocations(const model::Thread& th, Weight weight,
                               const std::function<uint32_t(model::StackId)>& node_of_stack) {
  std::vector<uint64_t> freed;
  if (weight == Weight::LeakedBytes) {
    for (const model::Allocation& a : th.allocations)
      if (a.bytes < 0) freed.push_back(a.address);
    std::sort(freed.begin(), freed.end());
  }
  for (const model::Allocation& a : th.allocations) {
    if (a.bytes <= 0) continue;
    if (weight == Weight::LeakedBytes && std::binary_search(freed.begin(), freed.end(), a.address)) continue;
    if (a.stack == model::kNoStack) {
      ++no_stack_;
      continue;
    }
    nodes_[node_of_stack(a.stack)].self +=
        weight == Weight::Allocations ? a.count : static_cast<uint64_t>(a.bytes);
  }
}

// Totals bottom-up: a child always has a larger index than its parent.
void CallTree::sum_totals() {
  CallTree& t = *this;
  for (auto& n : t.nodes_) {
    n.total += n.self;
    n.total_cpu_ns += n.self_cpu_ns;
  }
  for (size_t i = t.nodes_.size(); i-- > 1;) {
    Node& n = t.nodes_[i];
    t.nodes_[n.parent].total += n.total;
    t.nodes_[n.parent].total_cpu_ns += n.total_cpu_ns;
  }
}

// Children lists (CSR), sorted by function name then id.
void CallTree::link_children(const FunctionTable& functions) {
  CallTree& t = *this;
  const size_t nn = t.nodes_.size();
  t.child_begin_.assign(nn + 1, 0);
  for (size_t i = 1; i < nn; ++i) ++t.child_begin_[t.nodes_[i].parent + 1];
  for (size_t i = 0; i < nn; ++i) t.child_begin_[i + 1] += t.child_begin_[i];
  t.children_.resize(nn > 0 ? nn - 1 : 0);
  std::vector<uint32_t> fill(t.child_begin_.begin(), t.child_begin_.end() - 1);
  for (size_t i = 1; i < nn; ++i) t.children_[fill[t.nodes_[i].parent]++] = static_cast<uint32_t>(i);
  // Sorted by name then id: ranks computed once, so that sorting compares integers, not strings.
  std::vector<uint32_t> order(functions.size()), rank(functions.size());
  for (uint32_t f = 0; f < order.size(); ++f) order[f] = f;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const std::string& na = functions.function(a).name;
    const std::string& nb = functions.function(b).name;
    return na != nb ? na < nb : a < b;
  });
  for (uint32_t i = 0; i < order.size(); ++i) rank[order[i]] = i;
  for (size_t i = 0; i < nn; ++i) {
    std::sort(
        t.children_.begin() + t.child_begin_[i], t.children_.begin() + t.child_begin_[i + 1],
        [&](uint32_t a, uint32_t b) { return rank[t.nodes_[a].function] < rank[t.nodes_[b].function]; });
  }
}

std::vector<CallTree::FunctionStat> CallTree::function_stats(uint32_t root) const {
  std::unordered_map<FunctionId, FunctionStat> by_fn;
  std::unordered_map<FunctionId, uint32_t> on_path;  // how many times a function is on the current path
  walk(
      root,
      [&](uint32_t n) {
        const Node& node = nodes_[n];
        FunctionStat& st = by_fn[node.function];
        st.function = node.function;
        st.self += node.self;
        st.self_cpu_ns += node.self_cpu_ns;
        if (on_path[node.function]++ == 0) {
          st.total += node.total;
          st.total_cpu_ns += node.total_cpu_ns;
        }
      },
      [&](uint32_t n) { --on_path[nodes_[n].function]; });
  std::vector<FunctionStat> out;
  out.reserve(by_fn.size());
  for (auto& [f, st] : by_fn) out.push_back(st);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.self != b.self) return a.self > b.self;
    if (a.total != b.total) return a.total > b.total;
    return a.function < b.function;
  });
  return out;
}

}  // namespace fxprof::sinks
