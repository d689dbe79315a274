// Test and bench support for the unwinder: records a child program with the recorder's own perf event and
// ring reading (recorder/perf.h: make_attr, perf_event_open, RingSet; user space, DWARF registers and stack)
// and replays the records, in time order, into an Unwinder. Also resolves addresses to ELF .symtab names (the
// binary's, else its debug file's).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::unwind_test {

struct Record {
  enum Kind { Mmap, Exec, Fork, Exit, Sample } kind;
  uint64_t time = 0;
  uint32_t pid = 0, tid = 0, ppid = 0;
  // Mmap
  uint64_t start = 0, len = 0, pgoff = 0;
  std::string path;
  // Sample
  recorder::UserRegs regs;
  std::vector<std::byte> stack;
  std::vector<uint64_t> callchain;  // the kernel's frame-pointer chain (user part)
};

struct Capture {
  std::vector<Record> records;  // sorted by time
  uint64_t lost = 0;
  int exit_status = -1;
  uint32_t pid = 0;
  size_t samples() const;
};

struct CaptureOptions {
  double frequency_hz = 1000;
  uint32_t stack_size = 32768;
};

// Runs argv[0] (a path) with argv, sampling it and all its threads until it exits.
Result<Capture> capture_command(const std::vector<std::string>& argv, const CaptureOptions& options = {});

// Reads the samples and mappings of a perf.data file written by `perf record --call-graph dwarf` (one event),
// so that our unwinder can be run on exactly the samples perf unwound.
Result<Capture> read_perf_data(const std::string& path);

// Feeds every non-sample record to `u` and calls fn(record, result, frames) for each sample.
template <class Fn>
void replay(const Capture& cap, recorder::Unwinder& u, Fn&& fn) {
  std::vector<uint64_t> frames(1024);
  for (const Record& r : cap.records) {
    switch (r.kind) {
      case Record::Mmap:
        u.on_mmap(r.pid, r.start, r.len, r.pgoff, r.path);
        break;
      case Record::Exec:
        u.on_exec(r.pid);
        break;
      case Record::Fork:
        u.on_fork(r.ppid, r.pid);
        break;
      case Record::Exit:
        break;  // kept: samples of the same time may follow on another CPU's buffer
      case Record::Sample: {
        auto res = u.unwind(r.pid, r.regs, r.stack, frames);
        fn(r, res, std::span<const uint64_t>(frames.data(), res.count));
        break;
      }
    }
  }
}

// The [address, end) of section `name` in an ELF file (its svma range), or an error.
Result<std::pair<uint64_t, uint64_t>> section_range(const std::string& path, std::string_view name);

// Address -> function name, from the mappings seen in a capture (per pid).
class Symbolizer {
 public:
  explicit Symbolizer(const Capture& cap);
  ~Symbolizer();
  // "name" of the function containing addr ("?" when unknown). `ret` = addr is a return address.
  std::string name(uint32_t pid, uint64_t addr, bool ret) const;
  // The [start, end) svma range of function `name` in the ELF file `path`.
  static Result<std::pair<uint64_t, uint64_t>> symbol_range(const std::string& path, std::string_view name);
  // The module path for addr ("" when unknown).
  std::string module(uint32_t pid, uint64_t addr) const;

 private:
  struct Elf;
  struct Map {
    uint64_t start, end, pgoff;
    Elf* elf;
  };
  const Map* find(uint32_t pid, uint64_t addr) const;
  std::map<uint32_t, std::vector<Map>> maps_;
  std::map<std::string, std::unique_ptr<Elf>> elfs_;
};

}  // namespace fxprof::unwind_test
