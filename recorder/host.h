// fxprof recorder internals: the recorder's one boundary with the running system.
//
// Everything a recording learns from the kernel comes through two interfaces: the perf records of the ring
// buffers (the driver's RecordSource, driver/sources.h, read in rounds) and the /proc facts the profile
// builder and the RSS sampler ask for (Procfs: comm, cmdline, maps, task lists, stat, wchan, statm, and the
// kernel's function names from kallsyms). A recording can therefore be captured (recorder/capture.h: the
// records and every answer, as they came) and replayed through the same builder later, which is how the tests
// check that a real recording's stream gives the same profile again, and how a bug seen once on a machine can
// be kept.
//
// Cost: one virtual call per /proc read (~10 us each anyway) and one per reading round (every 25 ms at
// least, every quarter buffer at most); the records themselves are handed out by pointer, in place.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "driver/sources.h"
#include "perf/records.h"

namespace fxprof::recorder {

class Procfs {
 public:
  virtual ~Procfs() = default;
  // The text of a /proc file; an error when it cannot be read (the process is gone, not ours).
  virtual Result<std::string> read(const std::string& path) = 0;
  // The numeric entries of a /proc directory (/proc/PID/task), in directory order.
  virtual std::vector<uint32_t> list(const std::string& dir) = 0;
  // The kernel function that holds each of `addrs` (sorted, unique), from /proc/kallsyms: one name per
  // address, "" where none is known; empty when kallsyms hides the addresses (kernel.kptr_restrict).
  virtual std::vector<std::string> kernel_symbols(std::span<const uint64_t> addrs) = 0;
  // A hint that kernel_symbols() will be asked at the end of this recording: the live /proc starts reading
  // kallsyms in the background now (the kernel takes 150-300 ms to generate it under load), so the end only
  // looks the addresses up. The next kernel_symbols() call takes the table (and frees it once answered).
  virtual void prefetch_kernel_symbols() {}
};

// The running system's /proc.
Procfs& live_procfs();

// The records of the ring buffers and what a recording feeds its builder are the driver's
// (driver/driver.h, driver/sources.h): RecordSource, RecordRef and RecordSink. The builder
// (ProfileBuilder) and the capture's tap (CaptureWriter::tap) are sinks; the recorder and the replay make the
// same calls through the same driver.
using driver::feed_round;
using driver::RecordRef;
using driver::RecordSink;
using driver::RecordSource;

}  // namespace fxprof::recorder
