#include "model/profile.h"

#include <catch2/catch.hpp>

using namespace fxprof::model;

TEST_CASE("strings, frames and stacks are interned") {
  Profile p;
  StringId a = p.strings.intern("main");
  CHECK(p.strings.intern(std::string("ma") + "in") == a);
  CHECK(p.strings.intern("other") != a);
  for (int i = 0; i < 10000; ++i) p.strings.intern("s" + std::to_string(i));
  CHECK(p.strings.get(a) == "main");  // views stay valid as the table grows

  FrameId f1 = p.native_frame(0x1000), f2 = p.native_frame(0x2000);
  CHECK(p.native_frame(0x1000) == f1);
  CHECK(p.kernel_frame(0x1000) != f1);  // same address, other kind
  CHECK(p.label_frame("x") == p.label_frame("x"));

  std::vector<FrameId> path{f1, f2, f1};
  StackId s = p.stacks.intern_path(path);
  CHECK(p.stacks.intern_path(path) == s);
  CHECK(p.stacks.size() == 3);
  CHECK(p.stacks.frame(s) == f1);
  StackId parent = p.stacks.prefix(s);
  CHECK(parent < s);
  CHECK(p.stacks.frame(parent) == f2);
  CHECK(p.stacks.prefix(p.stacks.prefix(parent)) == kNoStack);
  CHECK(p.stacks.intern_path({}) == kNoStack);
}

TEST_CASE("every prefix comes before its stack") {
  Profile p;
  std::vector<FrameId> frames;
  for (int i = 0; i < 50; ++i) frames.push_back(p.native_frame(0x1000 + i));
  for (int n = 50; n > 0; n -= 7) p.stacks.intern_path(std::span(frames).first(n));
  for (StackId s = 0; s < p.stacks.size(); ++s)
    if (p.stacks.prefix(s) != kNoStack) CHECK(p.stacks.prefix(s) < s);
}

TEST_CASE("a sample is 16 bytes and its CPU delta saturates instead of wrapping") {
  STATIC_REQUIRE(sizeof(Sample) == 16);
  CHECK(saturate_cpu_delta(-1) == -1);
  CHECK(saturate_cpu_delta(-5'000) == -1);
  CHECK(saturate_cpu_delta(0) == 0);
  CHECK(saturate_cpu_delta(1'000'000) == 1'000'000);
  CHECK(saturate_cpu_delta(int64_t{3} << 40) == INT32_MAX);  // an hour unsampled: not negative
}

TEST_CASE("the stack index finds every stack again across its growth, with or without reserve") {
  for (size_t reserved : {size_t{0}, size_t{1000}, size_t{100000}}) {
    fxprof::model::StackTable t;
    t.reserve(reserved);
    // 60k distinct stacks: chains and fans, so that keys share prefixes.
    std::vector<fxprof::model::StackId> ids;
    fxprof::model::StackId prev = fxprof::model::kNoStack;
    size_t wrong = 0;  // counted, not asserted one by one: 120k assertions would cost seconds under ASan
    for (uint32_t i = 0; i < 60000; ++i) {
      const fxprof::model::StackId prefix = i % 3 == 0   ? fxprof::model::kNoStack
                                            : i % 3 == 1 ? prev
                                                         : ids[i / 2];
      const fxprof::model::StackId s = t.intern(prefix, i);
      wrong += s != ids.size();  // each (prefix, frame) above is new
      ids.push_back(s);
      prev = s;
    }
    CHECK(wrong == 0);
    REQUIRE(t.size() == 60000);
    for (uint32_t i = 0; i < 60000; ++i) wrong += t.intern(t.prefix(ids[i]), t.frame(ids[i])) != ids[i];
    CHECK(wrong == 0);
    CHECK(t.size() == 60000);
  }
}

TEST_CASE("the stack table gives the ids of first use, whatever order its children are found in") {
  // A parent with 40 children (past the few it links; the rest go to the index), found again in a varying
  // order, and under each child a chain: every id stays the one it got when first made, in that order.
  fxprof::model::StackTable t;
  const fxprof::model::StackId root = t.intern(fxprof::model::kNoStack, 7);
  CHECK(root == 0);
  std::vector<fxprof::model::StackId> child, leaf;
  for (uint32_t f = 0; f < 40; ++f) {
    child.push_back(t.intern(root, 100 + f));
    leaf.push_back(t.intern(child.back(), 1000 + f));
    CHECK(child.back() == 1 + 2 * f);
    CHECK(leaf.back() == 2 + 2 * f);
  }
  std::vector<fxprof::model::StackId> other(40, fxprof::model::kNoStack);  // a second leaf under each child
  size_t wrong = 0;
  for (uint32_t round = 0; round < 5; ++round)
    for (uint32_t k = 0; k < 40; ++k) {
      const uint32_t f = (k * 17 + round * 11) % 40;  // every child, in another order each round
      const fxprof::model::StackId c = t.intern(root, 100 + f);
      wrong += c != child[f];
      wrong += t.intern(c, 1000 + f) != leaf[f];
      const fxprof::model::StackId o = t.intern(c, 2000 + f);
      if (round == 0) wrong += o != t.size() - 1;  // new: the last id
      if (round == 0) other[f] = o;
      wrong += o != other[f];
    }
  CHECK(wrong == 0);
  CHECK(t.intern(fxprof::model::kNoStack, 7) == root);
  for (fxprof::model::StackId s = 1; s < t.size(); ++s) wrong += t.prefix(s) >= s;  // prefixes come first
  CHECK(wrong == 0);
  CHECK(t.size() == 81 + 40);
}
