#include "model/symbols.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "base/path.h"
#include "model/waits.h"

namespace fxprof::model {
namespace {

constexpr uint8_t kLeaf = 1, kCaller = 2;

struct Mapping {
  uint64_t start, end, base;
  BinaryId binary;
};

// The process's mappings (JIT code is named before, from the process's own table: model/jit_names.cpp).
std::vector<Mapping> mappings_of(Profile& p, const Process& proc) {
  std::vector<Mapping> out;
  for (const Lib* l : disjoint_libs(proc))
    out.push_back({l->start, l->end, l->start - l->offset, p.intern_binary(*l)});
  return out;
}

const Mapping* locate(const std::vector<Mapping>& maps, uint64_t addr) {
  auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                             [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == maps.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

// Marks the stacks a process's samples use: kLeaf for sampled stacks, kCaller for every prefix. `roles` is
// dense over all stacks and all zero on entry; the touched stacks are returned in increasing (topological)
// order. Every marked stack has all its prefixes marked, so a walk up stops at the first caller seen.
std::vector<StackId> mark_used(const Profile& p, const Process& proc, std::vector<uint8_t>& roles) {
  std::vector<StackId> touched;
  for (const Thread& t : proc.threads) {
    for (const Sample& s : t.samples) {
      if (s.stack == kNoStack) continue;
      bool fresh = roles[s.stack] == 0;
      if (fresh) touched.push_back(s.stack);
      roles[s.stack] |= kLeaf;
      if (!fresh) continue;
      for (StackId q = p.stacks.prefix(s.stack); q != kNoStack && !(roles[q] & kCaller);
           q = p.stacks.prefix(q)) {
        if (roles[q] == 0) touched.push_back(q);
        roles[q] |= kCaller;
      }
    }
    // Marker backtraces and allocation stacks hold return addresses only: the front end nudges all of them.
    auto callers_only = [&](StackId leaf) {
      for (StackId q = leaf; q != kNoStack && !(roles[q] & kCaller); q = p.stacks.prefix(q)) {
        if (roles[q] == 0) touched.push_back(q);
        roles[q] |= kCaller;
      }
    };
    for (const Marker& m : t.markers) callers_only(m.stack);
    for (const Allocation& a : t.allocations) callers_only(a.stack);
  }
  // In order: sorted when few, else read off `roles` in one pass (a full-mode heap profile touches 1M+
  // stacks, most of the table, where sorting them took longer than the pass).
  if (touched.size() < roles.size() / 16) {
    std::sort(touched.begin(), touched.end());
  } else {
    touched.clear();
    for (StackId s = 0; s < roles.size(); ++s)
      if (roles[s]) touched.push_back(s);
  }
  return touched;
}

// Where a native frame lives: binary and relative address, or nothing (outside every mapping, or not native,
// or already named).
struct Place {
  BinaryId binary = kNoBinary;
  uint64_t rel = 0;
};
Place place_of(const Frame& f, const std::vector<Mapping>& maps) {
  if (f.kind != FrameKind::Native || f.name != kNoString) return {};
  if (f.binary != kNoBinary) return {f.binary, f.address};
  if (const Mapping* m = locate(maps, f.address)) return {m->binary, f.address - m->base};
  return {};
}

uint64_t asked(const Place& pl, uint8_t role) { return role == kCaller && pl.rel > 0 ? pl.rel - 1 : pl.rel; }

// A chain's key: the place and which answer it holds (leaf's, caller's, or none: unresolved).
struct ChainKey {
  BinaryId binary;
  uint8_t variant;
  uint64_t rel;
  bool operator==(const ChainKey&) const = default;
};
struct ChainKeyHash {
  size_t operator()(const ChainKey& k) const noexcept {
    uint64_t h = (k.rel * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(k.binary) << 2 | k.variant);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

}  // namespace

std::vector<const Lib*> disjoint_libs(const Process& process) {
  std::vector<const Lib*> libs;
  for (const auto& l : process.libs)
    if (l.end > l.start) libs.push_back(&l);
  std::stable_sort(libs.begin(), libs.end(), [](const Lib* a, const Lib* b) { return a->start < b->start; });
  std::vector<const Lib*> out;
  uint64_t covered_to = 0;
  for (const Lib* l : libs) {
    if (l->start < covered_to) continue;  // overlaps the previous mapping: the locator needs disjoint ranges
    covered_to = l->end;
    out.push_back(l);
  }
  return out;
}

std::vector<SymbolRequest> symbol_requests(Profile& p) {
  std::vector<std::vector<uint64_t>> wanted;
  std::vector<uint8_t> roles(p.stacks.size(), 0);
  std::vector<uint8_t> frame_roles(p.frames.size(), 0);  // the roles each frame has in the process's stacks
  std::vector<FrameId> frames_used;
  for (const Process& proc : p.processes) {
    std::vector<Mapping> maps = mappings_of(p, proc);
    std::vector<StackId> used = mark_used(p, proc, roles);
    if (wanted.size() < p.binaries.size()) wanted.resize(p.binaries.size());
    // By frame: a deep stack's frames recur in many stacks (cc1plus's 1M heap stacks hold 7k frames).
    for (StackId s : used) {
      const FrameId f = p.stacks.frame(s);
      if (frame_roles[f] == 0) frames_used.push_back(f);
      frame_roles[f] |= roles[s];
      roles[s] = 0;
    }
    for (FrameId f : frames_used) {
      Place pl = place_of(p.frames.get(f), maps);
      if (pl.binary != kNoBinary && p.binaries[pl.binary].symbolicatable()) {
        for (uint8_t role : {kLeaf, kCaller})
          if (frame_roles[f] & role) wanted[pl.binary].push_back(asked(pl, role));
      }
      frame_roles[f] = 0;
    }
    frames_used.clear();
  }
  std::vector<SymbolRequest> out;
  for (size_t b = 0; b < wanted.size(); ++b) {
    auto& a = wanted[b];
    if (a.empty()) continue;
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    out.push_back({static_cast<BinaryId>(b), std::move(a), {}});
  }
  return out;
}

namespace {

// The new frame table as it is built: a frame that stays as it is copied once; a place's answer becomes a
// chain of frames (inlined functions expanded) made once per (binary, address, role) and shared by every
// process.
class FrameRewriter {
 public:
  FrameRewriter(Profile& p, const std::vector<SymbolRequest>& requests, ApplyTo scope)
      : p_(p), scope_(scope), kept_(p.frames.size(), kUnset) {
    for (const SymbolRequest& r : requests) {
      if (r.binary >= by_binary_.size()) by_binary_.resize(r.binary + 1, nullptr);
      by_binary_[r.binary] = &r;
    }
  }

  // The new frames of an old one at `pl` (as a leaf or as a caller), outermost first.
  const std::vector<FrameId>& frames_for(FrameId old, const Place& pl, uint8_t role,
                                         std::vector<FrameId>& scratch) {
    const Frame& f = p_.frames.get(old);
    const bool requested = pl.binary < by_binary_.size() && by_binary_[pl.binary];
    if (pl.binary == kNoBinary || (scope_ == ApplyTo::RequestedBinaries && !requested)) {
      if (kept_[old] == kUnset) kept_[old] = frames_.intern(f);
      scratch.assign(1, kept_[old]);
      return scratch;
    }
    const Symbol* sym = answer(pl.binary, asked(pl, role));
    ChainKey key{pl.binary, static_cast<uint8_t>(!sym ? 2 : role == kCaller ? 1 : 0), pl.rel};
    auto [it, inserted] = chains_.try_emplace(key);
    if (!inserted) return it->second;
    if (!sym) {
      Frame u = f;
      u.address = pl.rel;
      u.binary = pl.binary;
      it->second.push_back(frames_.intern(u));
      return it->second;
    }
    uint8_t depth = 0;
    for (const SymbolFrame& sf : *sym) {
      Frame n;
      n.kind = FrameKind::Native;
      n.category = f.category;
      n.address = pl.rel;
      n.binary = pl.binary;
      n.name = p_.strings.intern(sf.function);
      n.file = sf.file.empty() ? kNoString : p_.strings.intern(sf.file);
      n.line = sf.line;
      n.inline_depth = depth;
      if (depth < UINT8_MAX) ++depth;
      it->second.push_back(frames_.intern(n));
    }
    return it->second;
  }

  FrameTable take() { return std::move(frames_); }

 private:
  static constexpr FrameId kUnset = UINT32_MAX;

  const Symbol* answer(BinaryId b, uint64_t addr) const {
    if (b >= by_binary_.size() || !by_binary_[b]) return nullptr;
    const SymbolRequest& r = *by_binary_[b];
    auto it = std::lower_bound(r.addresses.begin(), r.addresses.end(), addr);
    if (it == r.addresses.end() || *it != addr) return nullptr;
    size_t i = static_cast<size_t>(it - r.addresses.begin());
    return i < r.answers.size() && !r.answers[i].empty() ? &r.answers[i] : nullptr;
  }

  Profile& p_;
  const ApplyTo scope_;
  std::vector<const SymbolRequest*> by_binary_;
  FrameTable frames_;
  std::vector<FrameId> kept_;  // old frame -> new, for frames copied as they are
  // (binary, rel, role) -> new frames, outermost first; shared by every process.
  std::unordered_map<ChainKey, std::vector<FrameId>, ChainKeyHash> chains_;
};

// A frame's new frames in one process, per role, found once: a deep stack's frames recur in many stacks.
// Emptied after each process by the frames it touched (a build's thousands of processes each touch few).
struct ProcessFrames {
  explicit ProcessFrames(size_t frames) : chains(frames), known(frames, 0) {}
  std::vector<std::array<std::vector<FrameId>, 2>> chains;  // per old frame: [leaf, caller]
  std::vector<uint8_t> known;                               // per old frame: the roles `chains` holds
  std::vector<FrameId> touched;
  std::vector<FrameId> scratch;
  void clear() {
    for (FrameId f : touched) {
      known[f] = 0;
      chains[f] = {};
    }
    touched.clear();
  }
};

// The stacks of one process rebuilt on the new frames, and its samples, markers and allocations pointed at
// them. `roles`, `remap` and `cache` are dense over all old stacks or frames, cleared again on return.
void rewrite_process(Profile& p, Process& proc, FrameRewriter& rewriter, StackTable& stacks,
                     std::vector<uint8_t>& roles, std::vector<std::array<StackId, 2>>& remap,
                     ProcessFrames& cache) {
  std::vector<Mapping> maps = mappings_of(p, proc);
  std::vector<StackId> used = mark_used(p, proc, roles);
  for (StackId s : used) {
    StackId old_prefix = p.stacks.prefix(s);
    StackId parent = old_prefix == kNoStack ? kNoStack : remap[old_prefix][1];
    FrameId old_frame = p.stacks.frame(s);
    for (uint8_t role : {kLeaf, kCaller}) {
      if (!(roles[s] & role)) continue;
      std::vector<FrameId>& chain = cache.chains[old_frame][role == kLeaf ? 0 : 1];
      if (!(cache.known[old_frame] & role)) {
        chain = rewriter.frames_for(old_frame, place_of(p.frames.get(old_frame), maps), role, cache.scratch);
        if (cache.known[old_frame] == 0) cache.touched.push_back(old_frame);
        cache.known[old_frame] |= role;
      }
      StackId node = parent;
      for (FrameId nf : chain) node = stacks.intern(node, nf);
      remap[s][role == kLeaf ? 0 : 1] = node;
    }
  }
  for (Thread& t : proc.threads) {
    for (Sample& smp : t.samples)
      if (smp.stack != kNoStack) smp.stack = remap[smp.stack][0];
    for (Marker& m : t.markers)
      if (m.stack != kNoStack) m.stack = remap[m.stack][1];
    for (Allocation& a : t.allocations)
      if (a.stack != kNoStack) a.stack = remap[a.stack][1];
  }
  for_each_waker_stack(p, proc, [&](StackId& s) { s = remap[s][1]; });
  for (StackId s : used) {
    roles[s] = 0;
    remap[s] = {kNoStack, kNoStack};
  }
  cache.clear();
}

}  // namespace

void apply_symbols(Profile& p, const std::vector<SymbolRequest>& requests, ApplyTo scope) {
  FrameRewriter rewriter(p, requests, scope);
  StackTable stacks;
  stacks.reserve(p.stacks.size());
  std::vector<uint8_t> roles(p.stacks.size(), 0);
  std::vector<std::array<StackId, 2>> remap(p.stacks.size(), {kNoStack, kNoStack});  // [leaf, caller]
  ProcessFrames cache(p.frames.size());
  for (Process& proc : p.processes) rewrite_process(p, proc, rewriter, stacks, roles, remap, cache);
  p.frames = rewriter.take();
  p.stacks = std::move(stacks);
}

}  // namespace fxprof::model
