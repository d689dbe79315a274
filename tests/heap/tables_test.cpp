// The tables HeapSource::finish() goes through the events with (heap/tables.h): the merge of the stream's
// ascending runs into time order, the live-block table and the stack trie.
#include "heap/tables.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <span>
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

TEST_CASE("heap tables: the stack trie gives one node per call path, whatever came before", "[heap]") {
  // Definitions as the shim sends them (heap/wire.h): the frames not shared with the thread's previous one.
  // Paths that share their outer frames in part, defined by two threads in turns, then again in a scrambled
  // order: a node's path up to the root is its stack, equal stacks get equal nodes, each distinct address
  // one index.
  StackTrie trie;
  std::vector<std::vector<uint64_t>> stacks;  // leaf first
  uint64_t x = 12345;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint64_t> s;
    const size_t depth = 1 + next() % wire::kMaxFrames;
    for (size_t d = 0; d < depth; ++d) s.push_back(0x1000 + (next() % 6) * 0x10 + d * 0x100);  // root first
    std::reverse(s.begin(), s.end());  // leaf first: its outer frames (the end) vary least
    stacks.push_back(s);
  }
  std::vector<uint64_t> last[2];  // each thread's previous definition
  std::vector<uint32_t> path[2];
  auto define = [&](int thread, const std::vector<uint64_t>& s) {
    std::vector<uint64_t>& l = last[thread];
    size_t shared = 0;
    while (shared < std::min(s.size(), l.size()) && s[s.size() - 1 - shared] == l[l.size() - 1 - shared])
      ++shared;
    l = s;
    return trie.intern(std::span(s).first(s.size() - shared), shared, path[thread]);
  };
  std::vector<uint32_t> node(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) node[i] = define(static_cast<int>(i % 2), stacks[i]);
  size_t wrong = 0, unequal = 0;
  for (size_t k = 0; k < stacks.size(); ++k) {
    const size_t i = (k * 7919) % stacks.size();
    wrong += define(static_cast<int>(k % 2), stacks[i]) != node[i];
    std::vector<uint64_t> up;
    for (uint32_t n = node[i]; n != StackTrie::kRoot; n = trie.parent(n))
      up.push_back(trie.address(trie.addr_index(n)));
    unequal += up != stacks[i];
  }
  CHECK(wrong == 0);
  CHECK(unequal == 0);
  CHECK(define(0, {}) == StackTrie::kRoot);
  std::map<uint64_t, uint32_t> index;  // each address one index, each index one address
  size_t mismatched = 0;
  for (uint32_t n = 0; n < trie.size(); ++n) {
    const uint32_t i = trie.addr_index(n);
    auto [it, fresh] = index.try_emplace(trie.address(i), i);
    mismatched += it->second != i;
  }
  CHECK(mismatched == 0);
  CHECK(trie.addresses() == index.size());
  std::set<uint32_t> indices;
  for (const auto& [addr, i] : index) indices.insert(i);
  CHECK(indices.size() == index.size());
  CHECK(*indices.rbegin() == index.size() - 1);
  // What the shim never sends: more shared frames than the thread's last definition has, or a stack deeper
  // than kMaxFrames.
  std::vector<uint32_t> fresh_path;
  const uint64_t one = 0x1000;
  CHECK(trie.intern(std::span(&one, 1), 1, fresh_path) == StackTrie::kNone);
  const std::vector<uint64_t> deep(wire::kMaxFrames, 0x2000);
  std::vector<uint32_t> deep_path;
  CHECK(trie.intern(deep, 0, deep_path) != StackTrie::kNone);
  CHECK(deep_path.size() == wire::kMaxFrames);
  CHECK(trie.intern(std::span(&one, 1), wire::kMaxFrames, deep_path) == StackTrie::kNone);
  CHECK(deep_path.size() == wire::kMaxFrames);  // untouched
}

}  // namespace
}  // namespace fxprof::heap
