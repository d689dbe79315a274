// fxprof recorder internals: the recorder's one boundary with the running system.
//
// Everything a recording learns from the kernel comes through the two interfaces here: the perf records of
// the ring buffers (RecordSource, read in rounds) and the /proc facts the profile builder and the RSS sampler
// ask for (Procfs: comm, cmdline, maps, task lists, stat, wchan, statm, and the kernel's function names from
// kallsyms). A recording can therefore be captured (recorder/capture.h: the records and every answer, as
// they came) and replayed through the same builder later, which is how the tests check that a real
// recording's stream gives the same profile again, and how a bug seen once on a machine can be kept.
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
#include "perf/records.h"

namespace fxprof::recorder {

struct Waking;

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

// One record of a reading round: where it is (readable until the source's release()) and its time. A file
// source's record may have no perf bytes of its own (`typed`: perf.data's scheduler tracepoints as switch
// records) or be a wakeup in the records' order (`waking`: perf.data's sched_waking samples, with `h` the
// sample, whose stack is the waker's): handled in place of `h` alone.
struct RecordRef {
  uint64_t time;
  const perf_event_header* h;
  bool switch_event;  // from a context-switches event's buffer (ProfileBuilder::handle)
  const perf::Record* typed = nullptr;
  Waking* waking = nullptr;
};

// What a recording feeds its profile builder, in the order it happens: the processes it starts with, the
// eBPF wakeups, each reading round's records (merged by time, readable until the call returns), and the end.
// The driver (recorder/driver.h) makes the rounds' calls from its sources.
// The one input of the builder (ProfileBuilder implements it) and of the capture (CaptureWriter::tap writes
// each call to the file, then passes it on): the recorder and the replay make the same calls.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Launch mode: the pid fxprof forked; its first exec keeps this entry and `name`.
  virtual void on_launched(uint32_t pid, const std::string& name, uint64_t time_ns) = 0;
  // Attach mode: a process (its name, threads and executable mappings from /proc), and a thread found when
  // its /proc/PID/task is scanned again.
  virtual void on_attached(uint32_t pid, uint64_t time_ns) = 0;
  virtual void on_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) = 0;
  // Off-CPU wakeups (recorder/waker.h), given before the round of records they happened in; their stacks
  // are moved out.
  virtual void on_wakings(std::span<Waking> w) = 0;
  virtual void on_records(std::span<const RecordRef> round) = 0;
  // The recording stopped at `end_ns` (waits still open end there): the profile is completed.
  virtual void on_end(uint64_t end_ns) = 0;
};

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Appends every record written since the last release(), from every buffer, in each buffer's order.
  virtual void collect(std::vector<RecordRef>& out) = 0;
  // Gives the space of everything collect() handed out back to the writer.
  virtual void release() = 0;
};

// One round of `source`'s records, merged by time, fed to `sink` and released: the driver's round
// (recorder/driver.h) with the source as its one source (sources.h's buffer_source). For tests of the
// builder with synthetic buffers. Returns the number of records handled.
size_t feed_round(RecordSource& source, RecordSink& sink);

}  // namespace fxprof::recorder
