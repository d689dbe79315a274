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
