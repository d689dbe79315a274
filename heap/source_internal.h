// fxprof heap recorder internals (heap/source.cpp): the encoding of calls recorded outside the shim
// (heap/external.cpp) into the shim's stream format. (The tables finish() matches frees with: heap/tables.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "heap/heap.h"

namespace fxprof::heap {

// `calls` as chunks of the shim's stream (heap/wire.h), so that they become the same events: every call in
// full mode; in sampled mode the same Poisson sampling by bytes as the shim (a countdown per thread, mean
// `rate` bytes), frees of sampled blocks only, a free marked temporary when its thread allocated nothing
// since.
std::vector<std::byte> external_chunks(std::span<const ExternalCall> calls, Mode mode, double rate);

}  // namespace fxprof::heap
