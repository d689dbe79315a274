// fxprof recorder: markers a program writes about itself, from the files it maps.
//
// Two kinds of file, found by the MMAP2 record of their mapping (the kernel reports data mappings too:
// perf.cpp sets mmap_data), on the thread that mapped them (the record's tid):
//  - samply's marker files, marker-PID.txt or marker-PID-*.txt (WebKit's JSC writes them, and samply reads
//    them): one line per interval, "START_NS END_NS NAME", CLOCK_MONOTONIC nanoseconds as our samples; NAME
//    is the rest of the line.
//  - the fxprof header's (include/fxprof/markers.h, include/fxprof/markers.rs, the NVTX/ITT injection
//    library): fxprof-markers-PID-*.txt, the same line followed by TAB-separated extras (".cat=CATEGORY",
//    ".instant", "KEY=VALUE" with a number or a "string"). A second file kind because samply takes all of
//    a line after END_NS as the name, and stops at the first line it cannot read. Such a file is mapped by
//    its writer and grows by windows: unwritten room is NUL bytes, and a window's unused end newlines.
//    Categories starting with '.' are fxprof's: an instant line of category ".thread_name" (the NVTX/ITT
//    library writes them: nvtxNameOsThread, __itt_thread_set_name) names the writing thread, or the thread
//    of its "tid" field, NAME (not a main thread: it keeps its process's name); it is not a marker.
// The files are followed while the program runs (every reading round) and read to their end when the
// process exits or the recording ends, opened like the JIT's perf maps (recorder/jit.h open_regular: a
// regular file, not a link, the process's user's or root's and writable by no one else). Bad lines are
// counted and said in a data-quality line; at most kMaxProgramMarkers markers are kept (memory is bounded:
// the rest are counted and said).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "model/profile.h"

namespace fxprof::recorder {

inline constexpr size_t kMaxProgramMarkers = 2'000'000;
inline constexpr size_t kMaxMarkerLine = 64 * 1024;  // a longer "line" is counted bad and skipped

inline constexpr std::string_view kThreadNameCategory = ".thread_name";

enum class MarkerFileKind : uint8_t { None, Samply, Fxprof };

// The kind of a marker file by its base name, and the pid the name gives (0 for None).
MarkerFileKind marker_file_kind(std::string_view path, uint32_t* pid = nullptr);

// One line (without its newline) as a program marker, its strings interned into `p`; false when it is not a
// marker line. An empty line is neither a marker nor bad: the caller skips it.
bool parse_marker_line(std::string_view line, MarkerFileKind kind, model::Profile& p, model::Marker& out);

// Follows one marker file: poll() hands over each complete line written since the previous poll.
class MarkerFileFollower {
 public:
  MarkerFileFollower(std::string path, std::vector<uint32_t> uids)
      : path_(std::move(path)), uids_(std::move(uids)) {}
  // `last`: the writer is done (its process exited, or the recording ends): a last line without its newline
  // is handed over too.
  void poll(const std::function<void(std::string_view line)>& line, bool last = false);
  const std::string& path() const { return path_; }
  // Why the file was not read ("" when it was): one data-quality line.
  const std::string& untrusted() const { return untrusted_; }
  uint64_t too_long() const { return too_long_; }  // lines over kMaxMarkerLine skipped

 private:
  std::string path_;
  std::vector<uint32_t> uids_;
  std::string untrusted_;
  UniqueFd fd_;
  bool refused_ = false;
  uint64_t offset_ = 0;  // the start of the first line not handed over yet
  uint64_t too_long_ = 0;
  std::string buf_;
};

}  // namespace fxprof::recorder
