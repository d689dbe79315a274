// Internal to symbolizer/: what a Symbolizer holds, shared by the files that implement its calls.
#pragma once

#include "symbolizer/cache.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::symbolizer {

struct Symbolizer::Impl {
  explicit Impl(Options options) : cache(std::move(options)) {}
  LibraryCache cache;
};

}  // namespace fxprof::symbolizer
