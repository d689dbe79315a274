// fxprof perf layer: the perf.data reader (what `perf record` writes), for `fxprof import`.
//
// Two shapes (tools/perf/Documentation/perf.data-file-format.txt in the kernel tree):
// - File mode ("PERFILE2", a 104-byte header): the attributes section (each event's perf_event_attr and the
//   ids its records carry), the data section (the records, in the order perf read its ring buffers: by CPU
//   and round, not by time), and after it the feature sections the header's bitmap lists. Read here:
//   BUILD_ID (each binary's build ID, by path), HOSTNAME, OSRELEASE, VERSION, ARCH, NRCPUS, CPUDESC,
//   TOTAL_MEM, CMDLINE, EVENT_DESC (the events' names).
// - Pipe mode (`perf record -o -`: a 16-byte header): everything is a record, the attributes
//   (HEADER_ATTR), event names (EVENT_UPDATE), features (HEADER_FEATURE) and build IDs (HEADER_BUILD_ID)
//   among the kernel's.
// Every length and count is checked against the bytes it describes: a truncated or lying file is a one-line
// error (fuzz/fuzz_perf_data.cpp), never a read past the end. The kernel's records are kept in time order
// (a stable sort: records written out of order are kept, not dropped), each 8-byte aligned; records perf
// synthesized for processes that ran before the recording (COMM, MMAP2, FORK at time 0) are stamped with
// the first time of the recording. A regular file is mapped (private: only stamped pages are copied), a
// pipe read whole. Compressed records (`perf record -z`, zstd) are inflated (libzstd: perf's own format,
// one stream per file, records cut across compressed records joined) into aligned storage and kept like the
// others; a record that inflates past 64 MB, or all of them past 100 times the file's size, is an error.
#pragma once

#include <linux/perf_event.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "perf/records.h"

namespace fxprof::perf {

// One entry of the build-ID table: the binary perf saw at `path`, and its build ID (raw bytes).
struct BuildIdEntry {
  int32_t pid = -1;
  uint16_t cpumode = 0;  // PERF_RECORD_MISC_KERNEL, _USER, ...
  std::string build_id;
  std::string path;
};

struct Features {
  std::string hostname, os_release, perf_version, arch, cpu_desc;
  uint32_t cpus_available = 0, cpus_online = 0;
  uint64_t total_mem_kb = 0;
  std::vector<std::string> cmdline;
  std::vector<BuildIdEntry> build_ids;
  // TRACING_DATA: the tracepoints' format files, among other bytes (perf/tracepoints.h reads their fields).
  std::string tracing_data;
};

struct Event {
  std::string name;  // EVENT_DESC's or EVENT_UPDATE's ("cycles:P"), else made from the type and config
  perf_event_attr attr{};
  std::vector<uint64_t> ids;
};

// A kernel record of the data, in time order.
struct RecordAt {
  uint64_t time;
  const perf_event_header* h;
};

class DataFile {
 public:
  // `path`, or standard input for "-". Errors name `path`.
  static Result<DataFile> read(const std::string& path);
  // From bytes in memory (copied): the tests' and the fuzz harness's entry.
  static Result<DataFile> parse(std::span<const std::byte> bytes, const std::string& name = "perf.data");

  bool pipe = false;
  std::vector<Event> events;
  Layout layout;  // the events' attributes and ids (decode() reads the records by it)
  Features features;
  std::vector<RecordAt> records;
  uint64_t out_of_order = 0;  // records whose time was before an earlier record's in the file
  uint64_t dropped = 0;       // records of a type fxprof does not read (AUX data, tracing data, ...)

 private:
  Result<bool> load(const std::string& name);
  Mapping map_;
  std::vector<uint64_t> owned_;                // a pipe's bytes, or parse()'s copy
  std::deque<std::vector<uint64_t>> aligned_;  // records that were not 8-byte aligned in the file
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

// An event's name from its type and config when the file names none ("cycles", "cpu-clock", "type:config").
std::string event_name(const perf_event_attr& attr);

}  // namespace fxprof::perf
