#include "heap/source_fold.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "heap/source_internal.h"
#include "model/counters.h"

namespace fxprof::heap::internal {

TimeMap::TimeMap(std::vector<Pair> clocks) {
  if (clocks.empty()) return;
  std::sort(clocks.begin(), clocks.end(), [](const Pair& a, const Pair& b) { return a.tsc < b.tsc; });
  knots_.push_back(clocks.front());
  for (size_t i = 1; i < clocks.size(); ++i) {
    const Pair& c = clocks[i];
    const Pair& k = knots_.back();
    if (c.tsc > k.tsc && c.ns > k.ns && (c.ns - k.ns >= 1000000 || i + 1 == clocks.size()))
      knots_.push_back(c);
  }
}

uint64_t TimeMap::operator()(uint64_t t) const {
  if (knots_.empty()) return t;
  if (knots_.size() == 1) return knots_[0].ns;  // one instant: nothing to scale by
  auto it =
      std::upper_bound(knots_.begin(), knots_.end(), t, [](uint64_t v, const Pair& k) { return v < k.tsc; });
  size_t hi = std::clamp<size_t>(static_cast<size_t>(it - knots_.begin()), 1, knots_.size() - 1);
  const Pair& a = knots_[hi - 1];
  const Pair& b = knots_[hi];
  const double slope = double(b.ns - a.ns) / double(b.tsc - a.tsc);
  const double ns = double(a.ns) + (double(t) - double(a.tsc)) * slope;
  return ns <= 0 ? 0 : static_cast<uint64_t>(ns);
}

namespace {
size_t key_hash(uint32_t inst, uint32_t tid, uint32_t stack, uint32_t born, uint32_t died, bool peak) {
  uint64_t h = (uint64_t{inst} << 40) ^ (uint64_t{tid} << 20) ^ stack;
  h = (h ^ (uint64_t{born} << 32 | died)) * 0x9E3779B97F4A7C15ull;
  h ^= (h >> 29) ^ peak;
  return static_cast<size_t>(h * 0x9E3779B97F4A7C15ull >> 20);
}
}  // namespace

uint32_t& Fold::Groups::slot(const Key& k) {
  const size_t mask = slots_.size() - 1;
  for (size_t i = key_hash(k.inst, k.tid, k.stack, k.born, k.died, k.peak) & mask;; i = (i + 1) & mask)
    if (slots_[i] == kEmpty || groups_[slots_[i]].key == k) return slots_[i];
}

Fold::Group& Fold::Groups::at(const Key& k, uint64_t first) {
  uint32_t& s = slot(k);
  if (s != kEmpty) return groups_[s];
  s = static_cast<uint32_t>(groups_.size());
  groups_.push_back({k, first, 0, 0, 0});
  if (groups_.size() * 2 > slots_.size()) {
    std::vector<uint32_t>(slots_.size() * 2, kEmpty).swap(slots_);
    for (uint32_t g = 0; g < groups_.size(); ++g) slot(groups_[g].key) = g;
  }
  return groups_.back();
}

void Fold::Groups::rekey(const std::function<Key(const Key&)>& f) {
  if (!f) {            // emptied: only the slots in use are cleared (pending_ is emptied at every new peak)
    scratch_.clear();  // (kept: no allocation per new peak)
    for (const Group& g : groups_) scratch_.push_back(&slot(g.key));
    for (uint32_t* s : scratch_) *s = kEmpty;
    groups_.clear();
    return;
  }
  std::vector<Group> old;
  old.swap(groups_);
  std::fill(slots_.begin(), slots_.end(), kEmpty);
  for (const Group& g : old) {
    Group& n = at(f(g.key), g.first);
    n.first = std::min(n.first, g.first);
    n.last_free = std::max(n.last_free, g.last_free);
    n.bytes += g.bytes;
    n.count += g.count;
  }
}

Fold::Fold(bool sampled, double rate, uint64_t unit_per_ms)
    : sampled_(sampled), rate_(rate), unit_per_ms_(std::max<uint64_t>(1, unit_per_ms)) {}

// Sampled mode: a block of s bytes was taken with probability p = 1 - exp(-s/rate) and stands for s/p bytes
// and 1/p blocks (Horvitz-Thompson: unbiased for every total). The records carry s; weighed here.
double Fold::chance(int64_t s) const {
  return -std::expm1(-static_cast<double>(std::max<int64_t>(s, 1)) / rate_);
}
int64_t Fold::bytes(int64_t s) const {
  return sampled_ ? std::llround(static_cast<double>(std::max<int64_t>(s, 1)) / chance(s)) : s;
}

// The peak of a noisy in-use estimate is the highest of its noise too: the plain maximum was 17% high on a
// plateau whose blocks turn over (tests/heap/sampling_test.cpp). Cross-fitted instead: the samples split at
// random into two halves (each weighed twice), the time of one half's highest point is read off the other
// half, which did not choose it, and the two readings are averaged. That leans low only by how far the
// chosen times are from the true peak. The split is by the allocation's place in the events (a hash of it):
// the same split for the same samples.
int Fold::half_of(uint64_t seq) const {
  uint64_t h = seq + 0x9E3779B97F4A7C15ull;  // splitmix64: no pattern
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int>((h ^ (h >> 31)) & 1);
}
void Fold::move_halves(uint64_t seq, int64_t d) {
  if (!sampled_) return;  // (full mode's peak is the maximum itself)
  const int k = half_of(seq);
  half_[k] += 2 * d;
  if (half_[k] > half_high_[k]) {
    half_high_[k] = half_[k];
    cross_[k] = half_[1 - k];
  }
}

// The Memory counter: one sample per process and 1 ms bucket with the bucket's change; a bucket whose highest
// point lies above both its ends is written as two samples (up to the high, then down from it), so that the
// track's maximum is the process's exact peak however briefly it was held.
void Fold::counter_add(uint32_t inst, uint32_t tid, uint64_t t, uint64_t ms, int64_t d) {
  if (inst >= counters_.size()) counters_.resize(size_t{inst} + 1);
  CounterState& c = counters_[inst];
  if (c.bucket == UINT64_MAX) {
    c.first_tid = tid;
    c.first_time = t;
  }
  const uint64_t bucket = ms;
  if (c.bucket != bucket) {
    counter_flush(c);
    c.bucket = bucket;
    c.high = c.written;
    c.high_count = 0;
  }
  c.value += d;
  ++c.count;
  c.last_time = t;
  if (c.value > c.high) {
    c.high = c.value;
    c.high_count = c.count;
  }
}
void Fold::counter_flush(CounterState& c) {
  if (c.count == 0) return;
  const uint64_t start = t0_ + c.bucket * unit_per_ms_;
  if (c.high > c.written && c.high > c.value) {
    c.samples.push_back({start, c.high - c.written, c.high_count});
    const uint64_t after = start + std::max<uint64_t>(1, unit_per_ms_ / 1000000);  // 1 ns on
    c.samples.push_back({std::max(c.last_time, after), c.value - c.high, c.count - c.high_count});
  } else {
    c.samples.push_back({start, c.value - c.written, c.count});
  }
  c.written = c.value;
  c.count = 0;
}

uint64_t& Fold::last_alloc(uint32_t inst, uint32_t tid) {
  const uint64_t key = uint64_t{inst} << 32 | tid;
  if (last_entry_ && last_key_ == key) return *last_entry_;
  last_key_ = key;
  last_entry_ = &last_alloc_[key];  // unordered_map: entries stay where they are
  return *last_entry_;
}

// Rows: blocks of one thread and stack allocated in one time bucket and freed in one (or not freed) share a
// row and its free row (model::Allocation), split by whether they were live at the peak: every per-stack sum
// the front end and `report --heap` take stays exact, and a profile of millions of allocations keeps a few
// rows per call site and bucket. The buckets are 1 ms to start with, doubled (the rows re-keyed) whenever
// the recording passes 128 of them: at most 128 over the recording, as the rows are made (re-keying them
// all after the exit, when it passed 256, was 20 ms of cc1plus's wait).
void Fold::widen(uint64_t ms, uint64_t buckets) {
  while ((ms >> shift_) >= buckets) {
    ++shift_;
    auto half = [](const Key& k) {
      return Key{k.inst, k.tid, k.stack, k.born / 2, k.died == UINT32_MAX ? UINT32_MAX : k.died / 2, k.peak};
    };
    groups_.rekey(half);
    pending_.rekey(half);
  }
}

void Fold::merge(Groups& into, Groups& from, bool peak) {
  if (from.empty()) return;
  for (const Group& g : from.all()) {
    Key k = g.key;
    k.peak = peak;
    Group& d = into.at(k, g.first);
    d.first = std::min(d.first, g.first);
    d.last_free = std::max(d.last_free, g.last_free);
    d.bytes += g.bytes;
    d.count += g.count;
  }
  from.rekey(nullptr);
}

void Fold::add_to(Groups& g, const Block& b, uint32_t died, bool peak, uint64_t died_time) {
  Group& r = g.at({b.inst, b.tid, b.stack, bucket(b.ms), died, peak}, b.time);
  r.first = std::min(r.first, b.time);
  r.last_free = std::max(r.last_free, died_time);
  r.bytes += bytes(b.size);
  ++r.count;
}

// A block ends at `t`: into its row. Live at the peak when allocated by it (and it is freed after it): at
// the final peak only if no higher one comes, so such rows wait in pending_ until the peak moves on.
void Fold::end_block(uint32_t bi, uint64_t t, uint64_t ms) {
  const Block b = blocks_[bi];
  counter_add(b.inst, b.tid, t, ms, -bytes(b.size));
  const bool at_peak = peak_seq_ != UINT64_MAX && b.seq <= peak_seq_;
  add_to(at_peak ? pending_ : groups_, b, bucket(ms), at_peak, t);
  free_blocks_.push_back(bi);
}

void Fold::add(const FoldEvent& e) {
  const uint64_t i = seq_++;
  if (i == 0) t0_ = e.time;
  last_time_ = std::max(last_time_, e.time);
  const uint64_t ms = ms_of(e.time);
  widen(ms, 128);
  if (e.alloc) {
    auto [slot, fresh] = live_.insert(e.inst, e.addr, 0);
    if (!fresh) {  // its free was not seen (reentrant)
      const uint32_t old = live_.event(slot);
      total_ -= bytes(blocks_[old].size);
      move_halves(blocks_[old].seq, -bytes(blocks_[old].size));
      end_block(old, e.time, ms);
      --live_blocks_;
    }
    uint32_t bi;
    if (!free_blocks_.empty()) {
      bi = free_blocks_.back();
      free_blocks_.pop_back();
    } else {
      bi = static_cast<uint32_t>(blocks_.size());
      blocks_.emplace_back();
    }
    blocks_[bi] = {e.time,
                   i,
                   static_cast<int64_t>(e.size),
                   e.inst,
                   e.tid,
                   e.stack,
                   static_cast<uint32_t>(std::min<uint64_t>(ms, UINT32_MAX))};
    live_.event(slot) = bi;
    last_alloc(e.inst, e.tid) = e.addr;
    const int64_t w = bytes(static_cast<int64_t>(e.size));
    counter_add(e.inst, e.tid, e.time, ms, w);
    ++live_blocks_;
    total_ += w;
    move_halves(i, w);
    if (total_ > peak_bytes_) {
      peak_bytes_ = total_;
      peak_time_ = e.time;
      merge(groups_, pending_, false);  // the peak moved on: what was freed since was not live at it
      peak_seq_ = i;
      live_at_peak_ = live_blocks_;
    }
    const int64_t s = static_cast<int64_t>(e.size);
    const size_t b = static_cast<size_t>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(s, 1) - 1)));
    bin_counts_[b] += sampled_ ? 1 / chance(s) : 1;
    bins_[b].bytes += static_cast<uint64_t>(w);
    return;
  }
  const size_t slot = live_.find(e.inst, e.addr);
  if (slot == LiveBlocks::kNone) return;  // not seen allocated (before the shim, or unsampled)
  const uint32_t bi = live_.event(slot);
  const Block& a = blocks_[bi];
  total_ -= bytes(a.size);
  move_halves(a.seq, -bytes(a.size));
  // Temporary: the thread's next event after allocating the block is its free (as heaptrack counts). In
  // sampled mode the shim, which sees the allocations between, says so in the free.
  uint64_t& last = last_alloc(e.inst, e.tid);
  if (sampled_ ? e.size == 1 : last == e.addr) {
    const double c = sampled_ ? 1 / chance(a.size) : 1;
    temporary_ += c;
    temporary_var_ += c * (c - 1);
  }
  last = 0;
  end_block(bi, e.time, ms);
  live_.erase(slot);
  --live_blocks_;
}

model::Meta::HeapStats Fold::stats(const std::function<uint64_t(uint64_t)>& to_ns) const {
  model::Meta::HeapStats stats;
  stats.sampled = sampled_;
  stats.rate_bytes = sampled_ ? rate_ : 0;
  stats.temporary = static_cast<uint64_t>(std::llround(temporary_));
  stats.temporary_error = static_cast<uint64_t>(std::llround(std::sqrt(temporary_var_)));
  stats.peak_bytes = peak_bytes_;
  stats.peak_time_ns = seq_ ? to_ns(peak_time_) : 0;
  // With few samples held at the peak the halves are too thin (one can hold none then): sqlite3's 5 MB peak
  // (~10 samples) came out 20% low and once 0, where the plain maximum was 12% high. Below 64 the maximum.
  if (sampled_ && live_at_peak_ >= 64) stats.peak_bytes = (cross_[0] + cross_[1]) / 2;
  for (size_t b = 0; b < bins_.size(); ++b) {
    if (bin_counts_[b] <= 0) continue;
    model::Meta::HeapStats::SizeBin bin = bins_[b];
    bin.count = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(bin_counts_[b])));
    bin.max_size = b == 0 ? 1 : b >= 64 ? UINT64_MAX : uint64_t{1} << b;
    stats.sizes.push_back(bin);
  }
  return stats;
}

void Fold::close_live_blocks() {
  // What is still allocated: rows without a free row, at the peak when allocated by it.
  widen(ms_of(last_time_), 128);
  std::vector<bool> freed(blocks_.size(), false);  // blocks_ holds the freed blocks' slots too
  for (uint32_t bi : free_blocks_) freed[bi] = true;
  for (uint32_t bi = 0; bi < blocks_.size(); ++bi) {
    if (freed[bi]) continue;
    const Block& b = blocks_[bi];
    add_to(groups_, b, UINT32_MAX, peak_seq_ != UINT64_MAX && b.seq <= peak_seq_, 0);
  }
  merge(groups_, pending_, true);
  live_ = LiveBlocks();
  blocks_ = {};
}

void Fold::write_counters(model::Profile& prof, const std::function<uint64_t(uint64_t)>& to_ns,
                          std::span<const uint32_t> inst_pid, ThreadCache& where) {
  // The Memory counters, on the process entry each instance is, in time order (an exec chain is several
  // instances of one process).
  std::map<uint32_t, std::vector<model::CounterSample>> by_proc;
  for (uint32_t inst = 0; inst < counters_.size(); ++inst) {
    CounterState& c = counters_[inst];
    if (c.bucket == UINT64_MAX) continue;
    counter_flush(c);
    const uint32_t proc = where.get(inst_pid[inst], c.first_tid, to_ns(c.first_time)).first;
    auto& out = by_proc[proc];
    for (const model::CounterSample& s : c.samples) out.push_back({to_ns(s.time_ns), s.delta, s.count});
    c.samples = {};
  }
  for (auto& [proc, samples] : by_proc) {
    std::stable_sort(
        samples.begin(), samples.end(),
        [](const model::CounterSample& a, const model::CounterSample& b) { return a.time_ns < b.time_ns; });
    // Each bucket's sample is at its start: the value still held just before it (model/counters.h writes
    // that where it matters, a gap of more than a bucket), and to the process's end.
    model::CounterSeries series(model::CounterSeries::Graph::Level, 1'000'000);
    for (const model::CounterSample& s : samples) {
      if (s.time_ns > 0) series.read(s.time_ns - 1, 0);
      series.read(s.time_ns, s.delta, s.count);
    }
    model::Process& p = prof.processes[proc];
    p.counters.push_back({"Heap", "Memory", "Heap bytes in use (fxprof --heap)",
                          series.finish(model::counter_end(prof, p, 0))});
  }
}

void Fold::write_rows(model::Profile& prof, const std::function<uint64_t(uint64_t)>& to_ns,
                      std::span<const uint32_t> inst_pid, const StackTrie& stacks, ThreadCache& where) {
  // The rows, in the order of their first allocation. Each node of the stacks used becomes a model stack
  // once, its parent first.
  std::vector<Group>& groups = groups_.all();
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.first < b.first; });
  std::vector<model::StackId> model_stack(stacks.size(), model::kNoStack);
  std::vector<model::FrameId> frame_of(stacks.addresses(), UINT32_MAX);  // by address index: a frame each
  std::vector<uint32_t> path;
  auto stack_of = [&](uint32_t s) {
    if (s >= stacks.size()) return model::kNoStack;
    for (uint32_t n = s; n != StackTrie::kRoot && model_stack[n] == model::kNoStack; n = stacks.parent(n))
      path.push_back(n);
    for (; !path.empty(); path.pop_back()) {
      const uint32_t n = path.back();
      const model::StackId parent =
          stacks.parent(n) == StackTrie::kRoot ? model::kNoStack : model_stack[stacks.parent(n)];
      model::FrameId& frame = frame_of[stacks.addr_index(n)];
      if (frame == UINT32_MAX) frame = prof.native_frame(stacks.address(stacks.addr_index(n)));
      model_stack[n] = prof.stacks.intern(parent, frame);
    }
    return model_stack[s];
  };
  std::vector<std::pair<uint32_t, uint32_t>> touched;
  uint64_t tag = 0;  // a row's "address": pairs it with its free row, nothing else
  for (const Group& g : groups) {
    const uint64_t first = to_ns(g.first);
    auto [pi, ti] = where.get(inst_pid[g.key.inst], g.key.tid, first);
    model::Thread& th = prof.processes[pi].threads[ti];
    if (th.allocations.empty()) touched.push_back({pi, ti});
    const model::StackId stack = stack_of(g.key.stack);
    const uint64_t last_free = g.key.died != UINT32_MAX ? to_ns(g.last_free) : 0;
    // A row counts at most UINT32_MAX blocks; a group of more (billions of one site in one bucket) is
    // written as rows of that many, the bytes shared out so that they add up.
    for (uint64_t left = g.count, bytes_left = static_cast<uint64_t>(g.bytes); left > 0;) {
      const uint64_t n = std::min<uint64_t>(left, UINT32_MAX);
      const int64_t b =
          n == left ? static_cast<int64_t>(bytes_left)
                    : static_cast<int64_t>(static_cast<double>(bytes_left) * double(n) / double(left));
      ++tag;
      th.allocations.push_back({first, stack, b, tag, th.tid, static_cast<uint32_t>(n), g.key.peak});
      if (g.key.died != UINT32_MAX)
        th.allocations.push_back({last_free, stack, -b, tag, th.tid, static_cast<uint32_t>(n), false});
      left -= n;
      bytes_left -= static_cast<uint64_t>(b);
    }
  }
  groups_.rekey(nullptr);
  for (auto [pi, ti] : touched) {
    auto& rows = prof.processes[pi].threads[ti].allocations;
    std::stable_sort(rows.begin(), rows.end(), [](const model::Allocation& a, const model::Allocation& b) {
      return a.time_ns < b.time_ns;
    });
  }
}

void Fold::finish(model::Profile& prof, const std::function<uint64_t(uint64_t)>& to_ns,
                  std::span<const uint32_t> inst_pid, const StackTrie& stacks) {
  prof.meta.heap = stats(to_ns);
  close_live_blocks();
  ThreadCache where(prof);
  write_counters(prof, to_ns, inst_pid, where);
  write_rows(prof, to_ns, inst_pid, stacks, where);
}

}  // namespace fxprof::heap::internal
