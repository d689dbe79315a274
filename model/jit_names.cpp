// JIT frames named by the code at their address at their sample's time (model/symbols.h, name_jit_frames).
//
// Why by time: V8, the JVM and others free code and put new code at the same address as they compile,
// deoptimise and collect; naming an address after the last entry written for it names a hot function
// after whatever happened to land there at the end. Each sample's stack is therefore renamed with its own
// time. Cost: the entries covering each address the samples use are found once (a sweep over the table
// sorted by start); a stack whose JIT addresses each had one function only is renamed once and reused, so
// only stacks through reused addresses cost a walk per sample.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/path.h"
#include "model/symbols.h"
#include "model/waits.h"

namespace fxprof::model {
namespace {

// The table's entries that cover each looked-up address, by load time (then file order).
class JitIndex {
 public:
  JitIndex(const std::vector<JitCode>& table, std::vector<uint64_t> addrs) : table_(table) {
    std::sort(addrs.begin(), addrs.end());
    addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
    std::vector<uint32_t> by_start;
    for (uint32_t i = 0; i < table.size(); ++i)
      if (table[i].end > table[i].start && !table[i].name.empty()) by_start.push_back(i);
    std::stable_sort(by_start.begin(), by_start.end(),
                     [&](uint32_t a, uint32_t b) { return table[a].start < table[b].start; });
    for (uint32_t i : by_start) starts_.insert(table[i].start);
    std::set<std::pair<uint64_t, uint32_t>> active;  // (end, entry) of entries starting at or before addr
    size_t next = 0;
    for (uint64_t a : addrs) {
      for (; next < by_start.size() && table[by_start[next]].start <= a; ++next)
        active.insert({table[by_start[next]].end, by_start[next]});
      while (!active.empty() && active.begin()->first <= a) active.erase(active.begin());
      if (active.empty()) continue;
      std::vector<uint32_t>& c = cover_[a];
      for (const auto& [end, i] : active) c.push_back(i);
      std::sort(c.begin(), c.end(), [&](uint32_t x, uint32_t y) {
        return table[x].from_ns != table[y].from_ns ? table[x].from_ns < table[y].from_ns : x < y;
      });
    }
  }

  bool entry_start(uint64_t addr) const { return starts_.count(addr) != 0; }

  const std::vector<uint32_t>* covering(uint64_t addr) const {
    auto it = cover_.find(addr);
    return it == cover_.end() ? nullptr : &it->second;
  }

  // The entry that answers `addr` at `t` (symbols.h says the rule); `c` is covering(addr), not empty.
  uint32_t at(const std::vector<uint32_t>& c, uint64_t t) const {
    const uint32_t* best = nullptr;
    for (const uint32_t& i : c)
      if (table_[i].from_ns <= t && t < table_[i].until_ns) best = &i;
    if (best) return *best;
    for (uint32_t i : c)
      if (table_[i].from_ns > t) return i;
    uint32_t gone = c.front();
    for (uint32_t i : c)
      if (table_[i].until_ns >= table_[gone].until_ns) gone = i;
    return gone;
  }

 private:
  const std::vector<JitCode>& table_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> cover_;
  std::unordered_set<uint64_t> starts_;
};

class Renamer {
 public:
  Renamer(Profile& p, const Process& proc) : p_(p), proc_(proc), old_stacks_(p.stacks.size()) {
    for (const Lib* l : disjoint_libs(proc)) libs_.push_back({l->start, l->end});
    dep_caller_.assign(old_stacks_, kUnknown);
  }

  // Every JIT address a used stack may ask, in both roles.
  std::vector<uint64_t> addresses(const std::vector<StackId>& used) {
    std::vector<uint64_t> out;
    for (StackId s : used) {
      const Frame& f = p_.frames.get(p_.stacks.frame(s));
      if (!candidate(f)) continue;
      out.push_back(f.address);
      if (f.address > 0) out.push_back(f.address - 1);
    }
    return out;
  }

  void set_index(const JitIndex* index) {
    index_ = index;
    jit_ = p_.intern_binary(jit_lib(proc_));
  }

  // The renamed stack of `s` used at time `t`, as a sample's leaf stack or as a caller (backtrace).
  StackId rename(StackId s, bool leaf, uint64_t t) {
    chain_.clear();
    StackId node = kNoStack;
    for (StackId q = s; q != kNoStack; q = p_.stacks.prefix(q)) {
      const bool l = leaf && q == s;
      if (!dependent(q, l)) {
        auto it = fixed_[l].find(q);
        if (it != fixed_[l].end()) {
          node = it->second;
          break;
        }
      }
      chain_.push_back(q);
    }
    for (size_t i = chain_.size(); i-- > 0;) {
      const StackId o = chain_[i];
      const bool l = leaf && i == 0;
      const FrameId f = renamed(p_.stacks.frame(o), l, t);
      if (f != kDropped) node = p_.stacks.intern(node, f);
      if (!dependent(o, l)) fixed_[l][o] = node;
    }
    return node;
  }

 private:
  static constexpr int8_t kUnknown = -1;
  static constexpr FrameId kDropped = UINT32_MAX;

  // An unnamed native frame outside every mapping of the process.
  bool candidate(const Frame& f) const {
    if (f.kind != FrameKind::Native || f.name != kNoString || f.binary != kNoBinary) return false;
    auto it =
        std::upper_bound(libs_.begin(), libs_.end(), f.address,
                         [](uint64_t a, const std::pair<uint64_t, uint64_t>& m) { return a < m.first; });
    return it == libs_.begin() || f.address >= std::prev(it)->second;
  }
  const std::vector<uint32_t>* covering(FrameId id, bool leaf) const {
    const Frame& f = p_.frames.get(id);
    if (!candidate(f) || (!leaf && f.address == 0)) return nullptr;
    return index_->covering(leaf ? f.address : f.address - 1);
  }
  // Whether the stack's renaming depends on the time: one of its JIT addresses had several functions.
  bool dependent(StackId s, bool leaf) {
    if (s >= old_stacks_) return false;
    if (leaf) {
      const std::vector<uint32_t>* c = covering(p_.stacks.frame(s), true);
      if (c && c->size() > 1) return true;
      StackId pre = p_.stacks.prefix(s);
      return pre != kNoStack && dependent(pre, false);
    }
    std::vector<StackId> up;
    StackId q = s;
    for (; q != kNoStack && dep_caller_[q] == kUnknown; q = p_.stacks.prefix(q)) up.push_back(q);
    bool dep = q != kNoStack && dep_caller_[q] == 1;
    for (size_t i = up.size(); i-- > 0;) {
      const std::vector<uint32_t>* c = covering(p_.stacks.frame(up[i]), false);
      dep = dep || (c && c->size() > 1);
      dep_caller_[up[i]] = dep ? 1 : 0;
    }
    return dep_caller_[s] == 1;
  }
  // The frame as named at `t`, or kDropped for a caller frame that is no return address: one at the
  // first byte of a function the runtime named, with no function before it. The return-address scan takes
  // such words for return addresses: Python 3.13's perf trampolines (`sub $8,%rsp; call *%rcx`) leave the
  // slot below their return address unwritten, and it often holds a stale pointer to a trampoline, which
  // gave 99 % of the stacks an unnamed frame and split each Python function in two.
  FrameId renamed(FrameId id, bool leaf, uint64_t t) {
    const Frame& fr = p_.frames.get(id);
    if (!leaf && candidate(fr) && fr.address > 0 && !index_->covering(fr.address - 1) &&
        index_->entry_start(fr.address))
      return kDropped;
    const std::vector<uint32_t>* c = covering(id, leaf);
    if (!c) return id;
    const uint32_t e = index_->at(*c, t);
    auto [it, fresh] = frames_.try_emplace(uint64_t{id} << 32 | e, 0);
    if (fresh) {
      const Frame& f = p_.frames.get(id);
      Frame n;
      n.kind = FrameKind::Native;
      n.category = f.category;
      n.address = f.address;
      n.binary = jit_;
      n.name = p_.strings.intern(proc_.jit[e].name);
      it->second = p_.frames.intern(n);
    }
    return it->second;
  }

  Profile& p_;
  const Process& proc_;
  const size_t old_stacks_;
  std::vector<std::pair<uint64_t, uint64_t>> libs_;  // [start, end), sorted, disjoint
  const JitIndex* index_ = nullptr;
  BinaryId jit_ = kNoBinary;
  std::vector<int8_t> dep_caller_;
  std::unordered_map<StackId, StackId> fixed_[2];  // [caller, leaf]: renamed stacks that hold at any time
  std::unordered_map<uint64_t, FrameId> frames_;   // (frame, entry) -> named frame
  std::vector<StackId> chain_;
};

// The stacks a process's samples, markers and allocations use, every prefix included.
std::vector<StackId> used_stacks(const Profile& p, const Process& proc) {
  std::vector<uint8_t> seen(p.stacks.size(), 0);
  std::vector<StackId> out;
  auto walk = [&](StackId s) {
    for (; s != kNoStack && !seen[s]; s = p.stacks.prefix(s)) {
      seen[s] = 1;
      out.push_back(s);
    }
  };
  for (const Thread& t : proc.threads) {
    for (const Sample& s : t.samples) walk(s.stack);
    for (const Marker& m : t.markers) walk(m.stack);
    for (const Allocation& a : t.allocations) walk(a.stack);
  }
  return out;
}

}  // namespace

Lib jit_lib(const Process& process) {
  Lib l;
  l.path = process.jit_source;
  l.name = base_name(l.path);
  if (l.name.empty()) l.name = "[jit]";
  return l;
}

void name_jit_frames(Profile& p) {
  for (Process& proc : p.processes) {
    if (proc.jit.empty()) continue;
    Renamer renamer(p, proc);
    const JitIndex index(proc.jit, renamer.addresses(used_stacks(p, proc)));
    renamer.set_index(&index);
    for (Thread& t : proc.threads) {
      for (Sample& s : t.samples)
        if (s.stack != kNoStack) s.stack = renamer.rename(s.stack, true, s.time_ns);
      for (Marker& m : t.markers)
        if (m.stack != kNoStack) m.stack = renamer.rename(m.stack, false, m.start_ns);
      for (Allocation& a : t.allocations)
        if (a.stack != kNoStack) a.stack = renamer.rename(a.stack, false, a.time_ns);
    }
    for (Process& q : p.processes)
      for (Thread& t : q.threads)
        for (Wait& w : t.waits)
          if (w.waker_stack != kNoStack && w.waker_pid == proc.pid)
            w.waker_stack = renamer.rename(w.waker_stack, false, w.wake_ns);
  }
}

}  // namespace fxprof::model
