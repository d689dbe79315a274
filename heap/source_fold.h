// fxprof heap recorder internals: the fold of the allocation and free events, in the order they happened,
// into what the profile keeps (heap/source.cpp feeds it; internal to heap/). It holds only what later events
// still need: the live blocks, the rows being filled (blocks of one thread, stack, allocation time bucket and
// free time bucket), the Memory counters' open buckets and the figures so far, so that HeapSource's worker
// can fold the stream while the program runs and finish() only translates the result into the model.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "heap/tables.h"
#include "model/profile.h"

namespace fxprof::heap::internal {

class ThreadCache;  // source_internal.h: the model thread of a (pid, tid) at a time

// One allocation or free. Times are in the fold's unit (TSC ticks, or ns), mapped to ns by finish().
struct FoldEvent {
  uint64_t time = 0;
  uint64_t addr = 0;
  uint64_t size = 0;  // an allocation's bytes; a free's temporary flag (sampled mode)
  uint32_t inst = 0;  // the process instance (a pid until it execs)
  uint32_t tid = 0;
  uint32_t stack = 0;  // an allocation's stack: its node in the StackTrie finish() gets (kRoot: none)
  bool alloc = false;
  bool tsc = false;  // (the stream's reader: time still in TSC ticks)
};

// TSC ticks to CLOCK_MONOTONIC ns through the clock pairs of every chunk (heap/wire.h): piecewise linear,
// thinned to pairs at least 1 ms apart (a pair's two reads are ~100 ns apart, so a slope over 1 ms is right
// to 1e-4) and increasing in both clocks, so the mapping increases and keeps the events' order; outside the
// pairs the nearest segment's slope continues. Without pairs, the identity (times already in ns).
class TimeMap {
 public:
  struct Pair {
    uint64_t tsc, ns;
  };
  explicit TimeMap(std::vector<Pair> clocks);
  uint64_t operator()(uint64_t t) const;
  bool identity() const { return knots_.empty(); }

 private:
  std::vector<Pair> knots_;
};

class Fold {
 public:
  // `unit_per_ms`: the time unit's ticks per millisecond (1e6 for ns): the Memory counter's buckets.
  Fold(bool sampled, double rate, uint64_t unit_per_ms);
  // Events in time order (equal times in stream order).
  void add(const FoldEvent& e);
  // Starts loading what folding `e` will touch (the live-block table's slot): the feeder asks a few events
  // ahead, so that the table's cache misses (one per event in a heap of millions of blocks) overlap.
  void prefetch(const FoldEvent& e) const { live_.prefetch(e.inst, e.addr); }
  uint64_t events() const { return seq_; }
  uint64_t last_time() const { return last_time_; }
  // Writes the rows, the Memory counters and meta.heap: `to_ns` maps the fold's times, `inst_pid` gives each
  // instance's pid, `stacks` the stacks' nodes.
  void finish(model::Profile& prof, const std::function<uint64_t(uint64_t)>& to_ns,
              std::span<const uint32_t> inst_pid, const StackTrie& stacks);

 private:
  struct Block {
    uint64_t time = 0, seq = 0;
    int64_t size = 0;
    uint32_t inst = 0, tid = 0, stack = 0;
    uint32_t ms = 0;  // ms_of(time)
  };
  struct Key {
    uint32_t inst, tid, stack, born, died;
    bool peak;
    bool operator==(const Key&) const = default;
  };
  struct Group {
    Key key;
    uint64_t first = 0, last_free = 0;
    int64_t bytes = 0;
    uint64_t count = 0;
  };
  // Key -> group: open addressing over group indices, doubled at half full (a node-based map's allocation
  // and cache miss per allocation event was a tenth of the work on python).
  class Groups {
   public:
    Group& at(const Key& k, uint64_t first);
    std::vector<Group>& all() { return groups_; }
    // Re-keys every group through `f` (merging those that meet) and empties the table when `f` is null.
    void rekey(const std::function<Key(const Key&)>& f);
    bool empty() const { return groups_.empty(); }

   private:
    static constexpr uint32_t kEmpty = UINT32_MAX;
    uint32_t& slot(const Key& k);
    std::vector<Group> groups_;
    std::vector<uint32_t*> scratch_;
    std::vector<uint32_t> slots_ = std::vector<uint32_t>(size_t{1} << 12, kEmpty);
  };
  struct CounterState {
    uint64_t bucket = UINT64_MAX;
    int64_t value = 0, written = 0, high = 0;
    uint64_t high_count = 0, count = 0, last_time = 0;
    uint32_t first_tid = 0;
    uint64_t first_time = 0;
    std::vector<model::CounterSample> samples;  // times in the fold's unit
  };

  int64_t bytes(int64_t size) const;
  double chance(int64_t size) const;
  int half_of(uint64_t seq) const;
  void move_halves(uint64_t seq, int64_t d);
  void counter_add(uint32_t inst, uint32_t tid, uint64_t t, uint64_t ms, int64_t d);
  void counter_flush(CounterState& c);
  // Milliseconds since the first event (one division per new millisecond, not per event).
  uint64_t ms_of(uint64_t t) {
    if (t >= ms_lo_ && t < ms_hi_) return ms_;
    ms_ = (t < t0_ ? 0 : t - t0_) / unit_per_ms_;
    ms_lo_ = t0_ + ms_ * unit_per_ms_;
    ms_hi_ = ms_lo_ + unit_per_ms_;
    return ms_;
  }
  uint32_t bucket(uint64_t ms) const {
    return static_cast<uint32_t>(std::min<uint64_t>(ms >> shift_, UINT32_MAX - 1));
  }
  void widen(uint64_t ms, uint64_t buckets);
  void end_block(uint32_t bi, uint64_t t, uint64_t ms);
  // finish()'s steps: meta.heap's figures; the blocks still allocated as rows; the Memory counters; the rows.
  model::Meta::HeapStats stats(const std::function<uint64_t(uint64_t)>& to_ns) const;
  void close_live_blocks();
  void write_counters(model::Profile& prof, const std::function<uint64_t(uint64_t)>& to_ns,
                      std::span<const uint32_t> inst_pid, ThreadCache& where);
  void write_rows(model::Profile& prof, const std::function<uint64_t(uint64_t)>& to_ns,
                  std::span<const uint32_t> inst_pid, const StackTrie& stacks, ThreadCache& where);
  static void merge(Groups& into, Groups& from, bool peak);
  void add_to(Groups& g, const Block& b, uint32_t died, bool peak, uint64_t died_time);
  uint64_t& last_alloc(uint32_t inst, uint32_t tid);

  const bool sampled_;
  const double rate_;
  const uint64_t unit_per_ms_;
  uint64_t seq_ = 0, t0_ = 0, last_time_ = 0;
  uint64_t ms_ = 0, ms_lo_ = 0, ms_hi_ = 0;
  unsigned shift_ = 0;  // the rows' time buckets are 1 << shift_ ms
  LiveBlocks live_;
  std::vector<Block> blocks_;
  std::vector<uint32_t> free_blocks_;
  Groups groups_;
  Groups pending_;  // blocks live at the peak so far that were freed since: at the peak unless it moves on
  std::vector<CounterState> counters_;                 // by instance
  std::unordered_map<uint64_t, uint64_t> last_alloc_;  // (inst, tid) -> the address it allocated last
  uint64_t last_key_ = UINT64_MAX;
  uint64_t* last_entry_ = nullptr;
  // The figures (see Fold::add).
  int64_t total_ = 0, peak_bytes_ = 0, half_[2] = {0, 0}, half_high_[2] = {0, 0}, cross_[2] = {0, 0};
  int64_t live_blocks_ = 0, live_at_peak_ = 0;
  uint64_t peak_time_ = 0, peak_seq_ = UINT64_MAX;
  double temporary_ = 0, temporary_var_ = 0;
  std::array<model::Meta::HeapStats::SizeBin, 65> bins_{};
  std::array<double, 65> bin_counts_{};
};

}  // namespace fxprof::heap::internal
