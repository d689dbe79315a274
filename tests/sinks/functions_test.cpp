// The function view of frames: names for kernel frames, labels and unresolved addresses (library + offset),
// functions interned once, libraries deduplicated.
#include "sinks/functions.h"

#include <catch2/catch.hpp>

#include "tests/sinks/sink_models.h"

using namespace fxprof;

TEST_CASE("frames become functions") {
  model::Profile p = test::sink_profile();
  sinks::FunctionTable fns(p);
  model::FrameId native = p.native_frame(0x7f0000001234);  // already interned: same id
  auto in_child = fns.lines(1, native);
  REQUIRE(in_child.size() == 1);
  CHECK(fns.function(in_child[0].function).name == "libdemo.so+0x2234");
  CHECK(fns.function(in_child[0].function).kind == sinks::FunctionKind::User);
  REQUIRE(fns.function(in_child[0].function).lib >= 0);
  CHECK(fns.libs()[static_cast<size_t>(fns.function(in_child[0].function).lib)].code_id ==
        "ddccbbaaffee11002233445566778899");
  // The same address in a process without that library is just an address.
  auto in_app = fns.lines(0, native);
  CHECK(fns.function(in_app[0].function).name == "0x7f0000001234");

  model::FrameId k = p.kernel_frame(0xffffffff81000010);
  CHECK(fns.function(fns.lines(0, k)[0].function).name == "ksys_read");
  CHECK(fns.function(fns.lines(0, k)[0].function).kind == sinks::FunctionKind::Kernel);
  model::FrameId unnamed_k = p.kernel_frame(0xffffffff81000020);
  CHECK(fns.function(fns.lines(0, unnamed_k)[0].function).name == "[kernel] 0xffffffff81000020");

  // One function per name, whatever the number of frames.
  model::FrameId main1 = p.label_frame("main", model::Category::User);
  model::FrameId main2 = p.label_frame("main", model::Category::Other);
  CHECK(main1 != main2);
  CHECK(fns.lines(0, main1)[0].function == fns.lines(0, main2)[0].function);
  CHECK(fns.label("main") == fns.lines(0, main1)[0].function);
}
