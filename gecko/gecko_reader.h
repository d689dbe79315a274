// fxprof gecko: the Gecko reader, a source beside the Gecko writer. It reads fxprof's own Gecko output
// (plain or gzip) back into a model::Profile, so that `load`, `symbolicate` and the exports work from the
// model, exactly as `record` does.
//
// Design:
//  - Streaming: never the whole text, no DOM. The file is read, or gzip inflated (zlib streaming), 1 MiB at a
//    time (gecko/profile_stream.h); a small structural scanner walks the document's outline (the top-level
//    object, `threads`, `processes`, each process's and each thread's members), tracking strings, escapes and
//    nesting across chunk borders, and copies one piece at a time into a buffer that simdjson On-Demand
//    parses on its own: `meta`, `libs`, `counters`, each member of a thread, and a thread's samples table
//    (most of a profile's text) 64k rows at a time; other members are skipped unread. Each thread's tables
//    are read in document order and interned straight into the model's profile-wide tables (samples keep
//    their thread-local stack index until the thread's stackTable has been read). So the peak is the model
//    plus the largest piece (a thread's stack or frame table) and its simdjson index. No string is made per
//    sample, here or in the sinks (they aggregate per stack, sinks/call_tree.h).
//    Measured (bench/longprofile.sh: 8 threads x 1 h x 1 kHz, 28.8M samples, 2.2M distinct stacks, 314 MB
//    gzipped): the whole-text reader peaked at 2.78 GB, 101 bytes per sample, in symbolicate, export and
//    report alike; streaming, symbolicate peaks at 26 bytes per sample (720 MB) and export folded and
//    report at 32 (887 MB: the call tree of 2.2M stacks on top), of which the model (16-byte samples, the
//    stack table) is 20. One busy thread for an hour (3.6M samples): 97 bytes per sample when a thread was
//    read whole, 35-40 now. Writing (the model and the Gecko writer, record's side) peaks at 22.
//  - It reads what the writer writes (see gecko.h): "0x<abs>" native frames, "func (in lib)" and
//    "0x<rel> (in lib)" pre-symbolicated ones with our file/inline-depth/address columns, kernel frames
//    "name (in [kernel.kallsyms])", labels; sample and marker times relative to each process's startTime,
//    converted back to CLOCK_MONOTONIC nanoseconds (meta.startTimeAsClockMonotonicNanosecondsSinceBoot).
//    write -> read -> write gives the same file.
//  - Untrusted input gets one-line errors naming the file, decided as early as possible: not a regular file
//    (a FIFO would block forever), empty, neither gzip nor '{' in the first bytes ("not a profile", without
//    reading a 1 GiB file on), gzip that inflates beyond kMaxInflateRatio x its size or kMaxInflatedBytes
//    (gzip bombs: 2 MB can inflate to 2.6 GB), one string or number longer than kMaxJsonStringBytes,
//    truncated or corrupt JSON, numbers beyond double range.
//  - Processed-format profiles (samply's) are not Gecko: the reader says so (ReadInfo::processed) and the
//    caller serves them as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "model/profile.h"

namespace fxprof::gecko {

inline constexpr size_t kMaxInflateRatio = 200;  // profiles compress 8-30x; bombs ~1000x
inline constexpr size_t kMaxInflatedBytes = size_t{16} << 30;
// One JSON string or number (a function name, a path, a marker's text): longer ones are refused as they are
// read, before they are held whole (a 1 GiB name took 3 GB to parse). C++ names reach a few KiB.
inline constexpr size_t kMaxJsonStringBytes = size_t{1} << 20;

struct ReadInfo {
  bool gzip = false;  // by magic, not by name
  // A processed-format profile (meta.preprocessedProfileVersion): not read, or with libs_only, read to its
  // end for its libraries (the top level's and each thread's) in one process, all else skipped unread.
  bool processed = false;

  // Asked by the caller. libs_only: only what a symbol server needs, each process's meta and libs; threads
  // and counters are skipped unread (a structural scan, no model), so the profile comes back with no threads.
  bool libs_only = false;
  // Asked by the caller: the threads written as tracks made from the recorded ones (gecko.h, kSyntheticKey:
  // perf.data's other events, the critical-path tracks), which the model leaves out, kept here (in the
  // profile's tables) with their process's index, for a caller that writes the profile again.
  bool keep_tracks = false;
  std::vector<std::pair<size_t, model::Thread>> tracks;
};

// How much text is read (or inflated) at a time.
inline constexpr size_t kReadChunkBytes = size_t{1} << 20;

// Reads a Gecko profile file into a model. With info->processed set, the profile is returned empty (with
// libs_only: holding only the libraries).
Result<model::Profile> read_gecko_profile(const std::string& path, ReadInfo* info = nullptr);

// The same from JSON text in memory, handed to the reader `chunk_bytes` at a time (1 puts a chunk border
// at every byte: the tests' and the fuzzer's way to check that no border changes what is read). `name`
// prefixes error messages. `max_string_bytes`: the cap on one string or number (the fuzzer lowers it to
// reach the refusal at every chunk border with short inputs).
Result<model::Profile> read_gecko(std::string_view json, const std::string& name, ReadInfo* info = nullptr,
                                  size_t chunk_bytes = kReadChunkBytes,
                                  size_t max_string_bytes = kMaxJsonStringBytes);

// A whole profile file's text (gzip inflated, several members too, within the limits above), with the
// same early checks and errors. For tests and small files: the reader never holds the whole text.
Result<std::string> read_profile_bytes(const std::string& path, bool* was_gzip = nullptr);

// "truncated JSON", "empty file" or "not valid JSON (<reason>)" for JSON text that failed to parse.
std::string describe_json_error(std::string_view text, int simdjson_error);

}  // namespace fxprof::gecko
