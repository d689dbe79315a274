// The tables HeapSource::finish() goes through the events with (heap/tables.h): the merge of the stream's
// ascending runs into time order, and the live-block table.
#include "heap/tables.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

namespace fxprof::heap {
namespace {

TEST_CASE("heap tables: merge_runs orders runs by time, equal times in stream order", "[heap]") {
  using E = std::pair<uint64_t, int>;  // (time, position in the stream)
  // Five runs (an odd one out each round): equal times across runs keep the earlier run's event first.
  const std::vector<uint64_t> times{1, 3, 5, 2, 2, 6, 0, 7, 4, 5, 5, 3};
  std::vector<E> v;
  for (size_t i = 0; i < times.size(); ++i) v.push_back({times[i], static_cast<int>(i)});
  merge_runs(v, [](const E& a, const E& b) { return a.first < b.first; });
  const std::vector<E> want{{0, 6}, {1, 0}, {2, 3}, {2, 4},  {3, 1}, {3, 11},
                            {4, 8}, {5, 2}, {5, 9}, {5, 10}, {6, 5}, {7, 7}};
  CHECK(v == want);
  std::vector<E> one{{1, 0}, {1, 1}, {2, 2}};  // one run: untouched
  merge_runs(one, [](const E& a, const E& b) { return a.first < b.first; });
  CHECK(one == std::vector<E>{{1, 0}, {1, 1}, {2, 2}});
  std::vector<E> none;
  merge_runs(none, [](const E& a, const E& b) { return a.first < b.first; });
  CHECK(none.empty());
}

TEST_CASE("heap tables: live blocks are found, replaced and erased across the table's growth", "[heap]") {
  LiveBlocks live;
  constexpr uint32_t kBlocks = 200000;  // past the first table's 64k slots: it doubles twice
  uint32_t fresh_blocks = 0;
  for (uint32_t i = 0; i < kBlocks; ++i) fresh_blocks += live.insert(7, 0x10000 + uint64_t{i} * 16, i).second;
  CHECK(fresh_blocks == kBlocks);
  // The same address in another process is another block.
  CHECK(live.insert(8, 0x10000, 1).second);
  CHECK(live.find(7, 0x10000) != live.find(8, 0x10000));
  // An address allocated again (its free unseen) finds the block it had.
  auto [again, fresh] = live.insert(7, 0x10000 + 5 * 16, 999);
  CHECK_FALSE(fresh);
  CHECK(live.event(again) == 5);
  for (uint32_t i = 0; i < kBlocks; i += 2) live.erase(live.find(7, 0x10000 + uint64_t{i} * 16));
  uint32_t found = 0, wrong = 0;
  for (uint32_t i = 0; i < kBlocks; ++i) {
    const size_t slot = live.find(7, 0x10000 + uint64_t{i} * 16);
    if (i % 2 == 0) {
      wrong += slot != LiveBlocks::kNone;
    } else {
      ++found;
      wrong += slot == LiveBlocks::kNone || live.event(slot) != i;
    }
  }
  CHECK(found == kBlocks / 2);
  CHECK(wrong == 0);
  CHECK(live.find(8, 0x10000) != LiveBlocks::kNone);
}

}  // namespace
}  // namespace fxprof::heap
