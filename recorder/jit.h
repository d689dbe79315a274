// fxprof recorder: names for JIT code, from the two files runtimes write for profilers.
//
//  - perf map, /tmp/perf-PID.map (`node --perf-basic-prof`, `python3.12 -X perf`, LuaJIT, .NET...): text,
//    one "START SIZE name" line per function (hex, no 0x needed), appended as code is generated.
//  - jitdump, jit-PID.dump (`node --perf-prof`, Java agents, wasmtime; perf's
//    tools/perf/Documentation/jitdump-specification.txt): a binary header, then records; JIT_CODE_LOAD
//    carries the name, address, size and code bytes of a function, JIT_CODE_MOVE a new address for one.
//    The runtime mmaps the file PROT_EXEC so that the kernel's MMAP2 record announces it (with its full
//    path, wherever the runtime wrote it): that is how the recorder finds it.
//
// Where the names live (the choice): the files belong to the recorded process and are gone or reused (the
// next process with that pid) by the time a profile is opened, so the recorder reads them when the process
// exits (EXIT of its main thread) or when recording ends, into model::Process::jit; the passes that follow
// every source (passes/passes.h, "jit names": model::name_jit_frames) name the frames of every stack then,
// heap rows included. Every later path sees the names: the lazily served Gecko file ("name (in perf-PID.map)"
// frames, which the front end takes as already symbolicated), baked profiles, exports, `fxprof report`.
// Nothing is left for /symbolicate/v5 to answer.
//
// Code is reused: a runtime may free a function and put another one at its address. Every entry keeps when
// it appeared (model::JitCode::from_ns): a jitdump record's timestamp (CLOCK_MONOTONIC, as our samples,
// unless the header says the runtime wrote TSC counts: those stay 0), a JIT_CODE_MOVE ending the old
// place; a perf map line (the format has no time) the time the recorder last read the map without it,
// since the recorder follows each map while recording (PerfMapFollower, polled every reading round: the
// map of a process with JIT code, from the first line the runtime wrote). model::name_jit_frames then
// names each sample after the code at its address at its time. Where a jitdump and a perf map both name
// code, the jitdump's entries win (they have exact times). Files are opened non-blocking and must be
// regular files (a FIFO named like a map would block the recorder otherwise), not symbolic links, at most
// kMaxJitFileBytes, owned by the process's user or root and not writable by group or others (else a
// data-quality line names the file: anyone can create /tmp/perf-PID.map before the process does, and
// perf checks the owner too).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "model/profile.h"

namespace fxprof::recorder {

inline constexpr uint64_t kMaxJitFileBytes = uint64_t{1} << 30;
// A followed perf map keeps at most this much of entries, names included (~2.5M node functions); 10M lines
// used to peak at 1.74 GB, 30M at 4.43 GB. Names past it are dropped with a data-quality line.
inline constexpr size_t kMaxJitEntryBytes = size_t{256} << 20;

// Parses perf map text; malformed lines are skipped. Returns the entries in file order, from `seen_ns`.
std::vector<model::JitCode> parse_perf_map(std::string_view text, uint64_t seen_ns = 0);
// Parses a jitdump image (a truncated last record, as a runtime still writing leaves it, is ignored).
// An Error when the header is not a jitdump's (wrong magic or byte order, or too short).
Result<std::vector<model::JitCode>> parse_jitdump(std::string_view image);

// Reads and parses the file; an Error when it does not exist or is not a regular file.
// Why a JIT file must not name the code of a process whose users (real, effective) are `uids`: "" when its
// owner is one of them or root and neither group nor others may write it, else the reason ("owned by user
// 1001", "writable by others").
std::string jit_file_untrusted(uint32_t owner, uint32_t mode, std::span<const uint32_t> uids);

// "PATH: why" when the file `st` describes may not be used by a process of `uids` (jit_file_untrusted), else
// "".
std::string untrusted_file(const std::string& path, const struct stat& st, std::span<const uint32_t> uids);
// Opens a regular file (never blocks on a FIFO or device that happens to carry the name). Symbolic links
// are refused: anyone can create /tmp/perf-PID.map, and a link there must not make a recorder running as
// root copy lines of another file into a profile. Nor may a file of another user (jit_file_untrusted,
// checked on what was opened): then `*untrusted` says why. `st` gets the file's stat. Also what marker
// files are opened with (recorder/markers.h).
Result<UniqueFd> open_regular(const std::string& path, struct stat& st, std::span<const uint32_t> uids,
                              std::string* untrusted);

// Reads and parses the file; an Error when it does not exist, is not a regular file, or is not trusted for a
// process of `uids` (jit_file_untrusted, checked on the opened file; then `*untrusted` holds the message).
Result<std::vector<model::JitCode>> read_perf_map(const std::string& path, std::span<const uint32_t> uids,
                                                  std::string* untrusted = nullptr);
Result<std::vector<model::JitCode>> read_jitdump(const std::string& path, std::span<const uint32_t> uids,
                                                 std::string* untrusted = nullptr);

// A process's table: the perf map's entries, less those overlapping code the jitdump names, then the
// jitdump's.
std::vector<model::JitCode> merge_jit_sources(std::vector<model::JitCode> perf_map,
                                              std::vector<model::JitCode> jitdump);

// Follows a perf map as the runtime appends to it: poll() reads the complete lines added since the last
// poll and stamps them with that poll's time (they were written after it); a file not there yet is looked
// for again at the next poll; a file truncated or replaced (a new program with the pid) starts over; a file
// deleted (by its runtime, at exit) is read to its end from the open descriptor. Bounded: the text is read
// 4 MiB at a time, lines over 64 KiB are skipped, at most kMaxJitFileBytes are read and kMaxJitEntryBytes
// kept (dropped() says what was not).
class PerfMapFollower {
 public:
  // `uids`: the process's users, whose map it may be (jit_file_untrusted). `max_entry_bytes`: the entries
  // kept (tests lower it).
  PerfMapFollower(std::string path, std::vector<uint32_t> uids, size_t max_entry_bytes = kMaxJitEntryBytes)
      : path_(std::move(path)), uids_(std::move(uids)), max_entry_bytes_(max_entry_bytes) {}
  void poll(uint64_t now_ns);
  // A last poll (a last line without its newline included); the entries read, in file order.
  std::vector<model::JitCode> finish();
  const std::string& path() const { return path_; }
  // Why the map at the path was not read ("" when it was, or there was none): one data-quality line.
  const std::string& untrusted() const { return untrusted_; }
  // After finish(): which names were not kept ("" when all were): one data-quality line.
  const std::string& dropped() const { return dropped_text_; }

 private:
  void read_lines();
  void keep(std::vector<model::JitCode> lines);

  std::string path_;
  std::vector<uint32_t> uids_;
  std::string untrusted_, dropped_text_;
  UniqueFd fd_;
  uint64_t dev_ = 0, ino_ = 0, offset_ = 0;
  uint64_t last_ns_ = 0;    // the previous poll (0: none yet, or the recording's start)
  std::string partial_;     // a line not complete yet
  bool long_line_ = false;  // in a line too long to be a function's name, skipped to its end
  bool capped_ = false;     // kMaxJitFileBytes read: the rest is not
  size_t max_entry_bytes_, kept_bytes_ = 0, dropped_ = 0;
  std::vector<model::JitCode> entries_;
};

// "jit-1234.dump" (any folder) -> 1234; 0 when `path` is not a jitdump file name.
uint32_t jitdump_pid(std::string_view path);

}  // namespace fxprof::recorder
