// fxprof sinks: pprof's profile.proto (gzip), what `go tool pprof`, Pyroscope, Parca and Grafana read.
//
// Encoded with protozero (Debian libprotozero-dev, header-only: no generated code, no libprotobuf runtime);
// the field numbers are those of github.com/google/pprof/proto/profile.proto, listed in pprof.cpp.
//  - One Sample per distinct (thread, stack), values [samples/count, cpu/nanoseconds, off_cpu/nanoseconds
//    (an interval per blocked or preempted sample)], labels "thread", "tid", "process", "pid", and "marker":
//    the innermost program marker the samples fell in (model/markers.h), so Pyroscope filters by it. Samples
//    are aggregated per thread in a hash map keyed by stack id: no per-sample string or message. A profile
//    with heap data (record --heap) adds alloc_objects/count, alloc_space/bytes, inuse_objects/count,
//    inuse_space/bytes (Go's heap profile names) from its allocation rows: in use = allocated and not freed
//    by the end.
//  - One Location per (process, frame): its absolute address, its Mapping (the library holding it) and one
//    Line per function of its inline chain, innermost first (pprof's order: the last Line is the caller the
//    others were inlined into).
//  - One Mapping per library of a process (start, limit, file offset, path, build ID); one Function per
//    function (name, system name, file, start line).
//  - The message is written in 256 KiB pieces as it is built (top-level fields may come in any order): the
//    string table goes last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"
#include "model/profile.h"
#include "sinks/functions.h"
#include "sinks/output.h"

namespace fxprof::sinks {

// Writes `profile` to `path` ("-": standard output; gzip when it ends in ".gz", as the default
// profile.pb.gz does). `clock`: Cpu counts only on-CPU samples in samples/count (off-CPU ones keep their
// off_cpu/nanoseconds); Wall counts every sample there.
Status write_pprof(const model::Profile& profile, const std::string& path, Clock clock = Clock::Cpu);

// Part of a profile as its own pprof (`fxprof agent` pushes one series per process and profile type):
// one process's samples only, and/or one kind of value. Cpu: samples/count and cpu/nanoseconds of the
// on-CPU samples (Pyroscope's process_cpu); OffCpu: off_cpu/nanoseconds of the blocked ones. The header's
// period and times are the profile's.
struct PprofPart {
  enum class Values : uint8_t { All, Cpu, OffCpu };
  Values values = Values::All;
  static constexpr size_t kAllProcesses = SIZE_MAX;
  size_t process = kAllProcesses;  // an index into profile.processes
};

void write_pprof(const model::Profile& profile, OutputFile& out, Clock clock = Clock::Cpu,
                 const PprofPart& part = {});

}  // namespace fxprof::sinks
