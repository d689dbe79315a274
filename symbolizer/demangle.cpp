// Demangling through well-kept code: libiberty's cplus_demangle (binutils' and gdb's own, as perf uses it)
// for Rust legacy and v0 symbols, the C++ runtime's __cxa_demangle for C++. Rust legacy names lose their
// ::h<hash> part, as rustfilt and samply print them.
#include "symbolizer/demangle.h"

#include <cxxabi.h>
#include <libiberty/demangle.h>

#include <cstdlib>
#include <memory>

namespace fxprof::symbolizer {
namespace {

using Owned = std::unique_ptr<char, decltype(&std::free)>;

// Rust (legacy _ZN…17h<hash>E, with or without an LLVM ".llvm.N" suffix, and v0 _R…); "" when not Rust.
std::string rust_demangle(const std::string& mangled) {
  Owned d(cplus_demangle(mangled.c_str(), DMGL_PARAMS | DMGL_ANSI | DMGL_RUST), &std::free);
  return d ? std::string(d.get()) : std::string();
}

std::string cxx_demangle(const std::string& mangled) {
  int status = 0;
  Owned d(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && d ? std::string(d.get()) : std::string();
}

}  // namespace

std::string demangle(std::string_view name) {
  std::string_view suffix;
  if (name.size() > 4 && name.substr(name.size() - 4) == "@plt") {
    suffix = "@plt";
    name.remove_suffix(4);
  }
  std::string out;
  if (name.size() > 2 && name[0] == '_' && (name[1] == 'R' || name[1] == 'Z')) {
    std::string mangled(name);
    // A legacy Rust name ends in the path component "17h<16 hex digits>": C++ names without one go straight
    // to the C++ demangler (48k names of libLLVM and a C++ test binary: 11 ms, against 16-28 ms when every
    // name is offered to libiberty first).
    if (name[1] == 'R' || (name.starts_with("_ZN") && name.find("17h") != std::string_view::npos))
      out = rust_demangle(mangled);
    if (out.empty() && name[1] == 'Z') out = cxx_demangle(mangled);
  }
  if (out.empty()) out.assign(name);
  out.append(suffix);
  return out;
}

}  // namespace fxprof::symbolizer
