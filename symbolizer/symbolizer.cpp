// The Symbolizer's own state: its cache of libraries. The calls live by concern: lookup.cpp (addresses),
// source.cpp, disassemble.cpp; loading in load.cpp, the cache in cache.cpp, names in demangle.cpp.
#include "symbolizer/symbolizer.h"

#include "symbolizer/symbolizer_impl.h"

namespace fxprof::symbolizer {

Symbolizer::Symbolizer(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Symbolizer::~Symbolizer() = default;

void Symbolizer::add_known_lib(KnownLib lib) { impl_->cache.add_known(std::move(lib)); }

}  // namespace fxprof::symbolizer
