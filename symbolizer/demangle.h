// Internal to symbolizer/: symbol name demangling (C++ Itanium, Rust legacy and v0).
#pragma once

#include <string>
#include <string_view>

namespace fxprof::symbolizer {

// Returns the human-readable form of a linker symbol: Rust v0 (_R...) and legacy (_ZN...17h<hash>E, without
// the hash), C++ Itanium (through abi::__cxa_demangle), or the name unchanged. A "@plt" suffix is kept.
std::string demangle(std::string_view mangled);

// The Rust v0 demangler alone; an empty string when `mangled` is not a valid v0 symbol.
std::string demangle_rust_v0(std::string_view mangled);

}  // namespace fxprof::symbolizer
