// The frame-pointer splice: outer frames from the kernel's chain only after an address both walks share.
#include "recorder/unwind/splice.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace fxprof::recorder;

TEST_CASE("splice: a complete unwind is used as it is", "[unwind][splice]") {
  std::vector<uint64_t> out;
  std::vector<uint64_t> dw = {1, 2, 3}, fp = {1, 9, 8, 7};
  CHECK(!splice_fp_chain(dw, UnwindEnd::Complete, fp, out));
  CHECK(out == dw);
}

TEST_CASE("splice: a truncated unwind continues with the chain after the shared address",
          "[unwind][splice]") {
  std::vector<uint64_t> out;
  std::vector<uint64_t> dw = {1, 2, 3}, fp = {1, 5, 3, 4, 0x40};
  CHECK(!splice_fp_chain(dw, UnwindEnd::Truncated, fp, out));
  CHECK(out == std::vector<uint64_t>{1, 2, 3, 4, 0x40});
  CHECK(!splice_fp_chain(dw, UnwindEnd::Failed, fp, out));
  CHECK(out.size() == 5);
}

TEST_CASE("splice: without a shared address the stack stays truncated", "[unwind][splice]") {
  std::vector<uint64_t> out;
  std::vector<uint64_t> dw = {1, 2, 3};
  CHECK(splice_fp_chain(dw, UnwindEnd::Truncated, std::vector<uint64_t>{1, 5, 6}, out));
  CHECK(out == dw);
  // The shared address as the chain's last entry adds nothing: still truncated.
  CHECK(splice_fp_chain(dw, UnwindEnd::Truncated, std::vector<uint64_t>{1, 5, 3}, out));
  // The IP itself (entry 0) is no anchor.
  CHECK(splice_fp_chain(std::vector<uint64_t>{1}, UnwindEnd::Truncated, std::vector<uint64_t>{1, 5, 6}, out));
  CHECK(splice_fp_chain({}, UnwindEnd::Failed, std::vector<uint64_t>{1, 5}, out));
  CHECK(out.empty());
}
