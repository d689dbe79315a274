// Tests of symbolizer/demangle.cpp: the names the front end shows, pinned (they were the hand-written
// demangler's output and are libiberty's and __cxa_demangle's now).
#include "symbolizer/demangle.h"

#include <catch2/catch.hpp>
#include <string>

namespace sym = fxprof::symbolizer;

TEST_CASE("demangle: Rust legacy and v0, C++, suffixes, and garbage comes back unchanged") {
  CHECK(sym::demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE.llvm.123") ==
        "core::ptr::drop_in_place");
  CHECK(sym::demangle("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$"
                      "u7d$$u7d$$GT$"
                      "17h0123456789abcdefE") ==
        "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>");
  CHECK(sym::demangle("_RNvCs1234_7mycrate3foo") == "mycrate::foo");
  CHECK(sym::demangle("_RNCNvCs1234_7mycrate3foo0B3_") == "mycrate::foo::{closure#0}");
  CHECK(sym::demangle("_RINvNtC3std3mem8align_ofjEC3std") == "std::mem::align_of::<usize>");
  CHECK(sym::demangle("_RNvMCs1_3fooINtB2_3BarRShE3baz") == "<foo::Bar<&[u8]>>::baz");
  CHECK(sym::demangle("_RNvXCs1_3fooNtB2_3BarNtNtC4core3fmt7Display3fmt") ==
        "<foo::Bar as core::fmt::Display>::fmt");
  CHECK(sym::demangle("_ZN5outer5inner3BoxIiE5twiceEi@plt") == "outer::inner::Box<int>::twice(int)@plt");
  CHECK(sym::demangle("memcpy") == "memcpy");
  // Garbage never crashes and comes back unchanged.
  for (const char* bad : {"_R", "_RB_", "_RBBBBB", "_RNvB0_3foo", "_RIIIIIIIIII", "_ZN3foo", "_ZN", "_Z",
                          "_RNvCs_3f", "_RNvC999999999999999999999foo"})
    CHECK(sym::demangle(bad) == bad);
  std::string deep = "_R" + std::string(5000, 'I') + "C3foo";
  CHECK(sym::demangle(deep) == deep);
}

TEST_CASE("demangle: what rustc-demangle (rustfilt, samply) and c++filt print") {
  // rustc-demangle's own test case: $u20$-style escapes of a legacy symbol.
  CHECK(sym::demangle(
            "_ZN71_$LT$Test$u20$$u2b$$u20$$u27$static$u20$as$u20$foo..Bar$LT$Test$GT$$GT$3bar17h930b740aa94f"
            "1d3aE") == "<Test + 'static as foo::Bar<Test>>::bar");
  CHECK(sym::demangle("_RNvNtCs1234_7mycrate3foo3bar") == "mycrate::foo::bar");
  // C++ with a GCC clone suffix, as c++filt prints it.
  CHECK(sym::demangle("_Z11compute_hoti.cold") == "compute_hot(int) [clone .cold]");
  CHECK(sym::demangle("_ZNSt6vectorIiSaIiEE9push_backERKi") ==
        "std::vector<int, std::allocator<int> >::push_back(int const&)");
}
