// fxprof recorder: a pprof profile (profile.proto, as Go's runtime/pprof, Pyroscope, Parca and `fxprof
// export pprof` write it, gzipped or not) as a source of the profile model (`fxprof import`, and what
// report/export/diff/load read directly).
//
// pprof keeps no times: a sample is a stack (locations, leaf first, each a chain of inlined functions with
// file and line) with one value per sample type, and labels. The model gets:
//  - CPU samples from the counted type: "samples" (count), else "cpu" (nanoseconds, one sample per period),
//    else `--event TYPE`, else the first count type (Go's goroutine, contentions), else the default type;
//    a sample worth N becomes N model samples (the views count samples) with the "cpu" value shared out as
//    their CPU time, spread evenly over the profile's duration (times in a pprof are not recorded).
//  - Off-CPU samples from "off_cpu" (nanoseconds; fxprof's own export): one per period, ending in an Idle
//    label ("[blocked: futex]"), as `record --off-cpu` makes them.
//  - Allocations from Go's heap types (alloc_objects/alloc_space/inuse_objects/inuse_space): one row for
//    the blocks still in use, one row and its free for the others, so the heap views sum back to the same
//    four totals.
//  - Threads and processes from the labels that name them ("pid", "tid"/"thread_id", "thread",
//    "process"); a profile without them is one process and thread, named after its first mapping.
//  - Frames: a location in a mapping is a frame of that binary (binary-relative address, the mapping's build
//    ID), named from its lines when it has them (never symbolicated again), otherwise left for the
//    symbolizer to name if the binary is found; a location outside every mapping is a kernel frame above
//    the kernel's address split, a label otherwise.
// Bounded: at most 512 MB of protobuf (pprof_decode.h) and kMaxSamples model samples; anything malformed
// is a one-line error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/profile.h"
#include "recorder/perf_import.h"

namespace fxprof::recorder {

inline constexpr uint64_t kMaxPprofSamples = 50'000'000;  // 800 MB of model samples

struct PprofStats {
  uint64_t samples = 0, off_cpu_samples = 0, allocations = 0;  // model rows made
  uint32_t threads = 0, processes = 0;
  std::string counted;             // the sample type counted as samples, "type/unit" ("" with none)
  std::vector<std::string> types;  // every sample type, "type/unit"
};

struct PprofImported {
  model::Profile profile;
  PprofStats stats;
};

// Whether a file's first bytes (a few KB) are a pprof profile's: gzip whose first inflated byte, or a first
// byte, is the tag of a Profile field (a Gecko profile starts with '{', a perf.data with "PERFILE2").
bool looks_like_pprof(std::string_view head);
bool is_pprof_file(const std::string& path);

// `bytes`: the file's content (gzip or not). Of `options`, pids/tids filter and `event` names the counted
// sample type; a time range is an error (pprof samples have no times).
Result<PprofImported> import_pprof(std::string bytes, const ImportOptions& options);
// The same from a file (a regular file of at most 512 MB); errors name it.
Result<PprofImported> import_pprof_file(const std::string& path, const ImportOptions& options);

}  // namespace fxprof::recorder
