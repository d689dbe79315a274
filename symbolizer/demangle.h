// Internal to symbolizer/: symbol name demangling (C++ Itanium, Rust legacy and v0).
#pragma once

#include <string>
#include <string_view>

namespace fxprof::symbolizer {

// Returns the human-readable form of a linker symbol: Rust v0 (_R...) and legacy (_ZN...17h<hash>E, without
// the hash) through libiberty, C++ Itanium through abi::__cxa_demangle, or the name unchanged. A "@plt"
// suffix is kept.
std::string demangle(std::string_view mangled);

}  // namespace fxprof::symbolizer
