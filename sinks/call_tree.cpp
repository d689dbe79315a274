#include "sinks/call_tree.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace fxprof::sinks {

CallTree CallTree::build(const model::Profile& profile, FunctionTable& functions,
                         const TreeOptions& options) {
  CallTree t;
  t.nodes_.emplace_back();                          // the root
  std::unordered_map<uint64_t, uint32_t> child_of;  // parent << 32 | function
  auto child = [&](uint32_t parent, FunctionId f, bool inlined) {
    auto [it, inserted] = child_of.try_emplace((static_cast<uint64_t>(parent) << 32) | f,
                                               static_cast<uint32_t>(t.nodes_.size()));
    if (inserted) {
      Node n;
      n.parent = parent;
      n.function = f;
      n.depth = t.nodes_[parent].depth + 1;
      t.nodes_.push_back(n);
    }
    t.nodes_[it->second].inlined |= inlined;
    return it->second;
  };

  // node_of[stack] is valid when stamp[stack] == the current group (a group = one root node).
  const size_t nstacks = profile.stacks.size();
  std::vector<uint32_t> node_of(nstacks, 0), stamp(nstacks, 0);
  uint32_t group = 0, group_root = kNone;
  size_t group_process = SIZE_MAX;
  std::vector<model::StackId> chain;

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
      for (const model::Sample& s : th.samples) {
        if (s.stack == model::kNoStack) {
          ++t.no_stack_;
          continue;
        }
        uint32_t n;
        if (stamp[s.stack] == group) {
          n = node_of[s.stack];
        } else {
          // Walk up to a resolved prefix (or the root), then resolve back down.
          chain.clear();
          model::StackId st = s.stack;
          while (st != model::kNoStack && stamp[st] != group) {
            chain.push_back(st);
            st = profile.stacks.prefix(st);
          }
          n = st == model::kNoStack ? root : node_of[st];
          for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            for (const FrameLine& l : functions.lines(pi, profile.stacks.frame(*it))) {
              if (l.inlined && !options.inlined) continue;
              n = child(n, l.function, l.inlined);
            }
            node_of[*it] = n;
            stamp[*it] = group;
          }
        }
        Node& node = t.nodes_[n];
        ++node.self;
        if (s.cpu_delta_ns > 0) node.self_cpu_ns += static_cast<uint64_t>(s.cpu_delta_ns);
      }
    }
  }

  // Totals bottom-up: a child always has a larger index than its parent.
  for (auto& n : t.nodes_) {
    n.total += n.self;
    n.total_cpu_ns += n.self_cpu_ns;
  }
  for (size_t i = t.nodes_.size(); i-- > 1;) {
    Node& n = t.nodes_[i];
    t.nodes_[n.parent].total += n.total;
    t.nodes_[n.parent].total_cpu_ns += n.total_cpu_ns;
  }

  // Children lists (CSR), sorted by function name then id.
  const size_t nn = t.nodes_.size();
  t.child_begin_.assign(nn + 1, 0);
  for (size_t i = 1; i < nn; ++i) ++t.child_begin_[t.nodes_[i].parent + 1];
  for (size_t i = 0; i < nn; ++i) t.child_begin_[i + 1] += t.child_begin_[i];
  t.children_.resize(nn > 0 ? nn - 1 : 0);
  std::vector<uint32_t> fill(t.child_begin_.begin(), t.child_begin_.end() - 1);
  for (size_t i = 1; i < nn; ++i) t.children_[fill[t.nodes_[i].parent]++] = static_cast<uint32_t>(i);
  for (size_t i = 0; i < nn; ++i) {
    std::sort(t.children_.begin() + t.child_begin_[i], t.children_.begin() + t.child_begin_[i + 1],
              [&](uint32_t a, uint32_t b) {
                const auto& fa = functions.function(t.nodes_[a].function);
                const auto& fb = functions.function(t.nodes_[b].function);
                if (fa.name != fb.name) return fa.name < fb.name;
                return t.nodes_[a].function < t.nodes_[b].function;
              });
  }
  return t;
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
