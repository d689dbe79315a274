// fxprof recorder: captures what a recording fed its profile builder, and replays it.
//
// A capture file holds, in the order they happened: the event configuration, the processes launched or
// attached (with their times), the eBPF wakeups, every reading round's records (merged by time), the RSS
// sampler's ticks, the end: what the builder was fed (driver/driver.h's RecordSink), and every answer /proc
// gave the builder and the sampler
// (recorder/host.h's Procfs: comm, maps, task lists, stat, wchan, statm, kernel function names). replay()
// feeds the same calls to a new ProfileBuilder (the capture is one of the driver's sources,
// driver/sources.h), answering its /proc questions from the file, and so rebuilds the same profile: same
// samples, stacks, functions, markers and counters. The binaries themselves (ELF files, perf maps) are read
// from disk again, so a capture replays where the recorded programs still are.
//
// It exists for the tests (a real recording, captured, replayed and compared) and to keep a stream that
// showed a builder bug. Capturing costs the recording a copy of every record to the file (~33 MB/s per busy
// CPU with DWARF stacks); a recording without a capture path does no extra work but one branch per round.
//
// Format (native endianness and layout: the same build reads it back): "fxprof-capture 1\n", then entries,
// each a one-byte tag, a 32-bit payload length and the payload.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "model/profile.h"
#include "recorder/builder.h"
#include "recorder/host.h"
#include "recorder/perf.h"
#include "recorder/waker.h"

namespace fxprof::recorder {

class CaptureWriter final : public RecordSink {
 public:
  static Result<std::unique_ptr<CaptureWriter>> create(const std::string& path);
  explicit CaptureWriter(UniqueFd fd);  // create() makes the file
  ~CaptureWriter() override;
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // What the recorder did, as it did it: the configuration and the RSS sampler's ticks here, and what it
  // fed the builder through the sink (tap(RecordSink&)).
  void config(const EventConfig& events, const OffCpuConfig* off_cpu, double interval_ms);
  void rss_tick(uint64_t now_ns);
  // Writes what is buffered; the first write error is kept and returned by every later call.
  Status flush();

  // The taps: a Procfs that answers from `inner` and writes what it answered, and the writer itself as the
  // recording's RecordSink: each call is written, then passed on to `inner` (the builder).
  Procfs& tap(Procfs& inner);
  RecordSink& tap(RecordSink& inner) {
    next_ = &inner;
    return *this;
  }
  void on_launched(uint32_t pid, const std::string& name, uint64_t time_ns) override;
  void on_attached(uint32_t pid, uint64_t time_ns) override;
  void on_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) override;
  void on_wakings(std::span<Waking> w) override;
  void on_records(std::span<const RecordRef> round) override;
  void on_end(uint64_t end_ns) override;

 private:
  friend class CapturingProcfs;
  void begin(char tag);
  void put(const void* p, size_t n);
  template <class T>
  void put(const T& v) {
    put(&v, sizeof v);
  }
  void put_str(std::string_view s);
  void commit();  // ends the entry begin() started

  UniqueFd fd_;
  std::string buf_;
  size_t entry_at_ = 0;
  std::string error_;
  std::unique_ptr<Procfs> procfs_tap_;
  RecordSink* next_ = nullptr;
};

struct ReplayOptions {
  std::vector<std::string> symbol_dirs;  // as --symbol-dir: where the unwinder also looks for debug files
};

// Rebuilds the profile a capture file recorded (meta: the interval only).
Result<model::Profile> replay(const std::string& path, const ReplayOptions& options = {});

}  // namespace fxprof::recorder
