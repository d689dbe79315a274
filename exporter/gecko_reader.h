// fxprof exporter: the Gecko reader, a source beside the Gecko writer. It reads fxprof's own Gecko output
// (plain or gzip) back into a model::Profile, so that `load`, `symbolicate` and the exports work from the
// model, exactly as `record` does.
//
// Design:
//  - simdjson On-Demand, forward only: no DOM of the profile. Each thread's tables are read in document order
//    and interned straight into the model's profile-wide tables (samples keep their thread-local stack index
//    until the thread's stackTable has been read). Peak memory is the (inflated) text, simdjson's structural
//    index of it and the model: the old DOM reader held ~204 bytes per sample. Measured: 2M samples (48 MB of
//    JSON) peak at 176 MB, ~88 bytes per sample (the text ~24, simdjson's index ~32, the model's samples 24);
//    no string is made per sample, here or in the sinks (they aggregate per stack, exporter/call_tree.h).
//    So a 1 h x 8 thread x 1 kHz profile (29M samples) peaks near 2.5 GB while it is read: bounding that
//    would take a reader that streams the text instead of holding it whole.
//  - It reads what the writer writes (see gecko.h): "0x<abs>" native frames, "func (in lib)" and
//    "0x<rel> (in lib)" pre-symbolicated ones with our file/inline-depth/address columns, kernel frames
//    "name (in [kernel.kallsyms])", labels; sample and marker times relative to each process's startTime,
//    converted back to CLOCK_MONOTONIC nanoseconds (meta.startTimeAsClockMonotonicNanosecondsSinceBoot).
//    write -> read -> write gives the same file.
//  - Untrusted input gets one-line errors naming the file, decided as early as possible: not a regular file
//    (a FIFO would block forever), empty, neither gzip nor '{' in the first bytes ("not a profile", without
//    reading a 1 GiB file on), gzip that inflates beyond kMaxInflateRatio x its size or kMaxInflatedBytes
//    (gzip bombs: 2 MB can inflate to 2.6 GB), truncated or corrupt JSON, numbers beyond double range.
//  - Processed-format profiles (samply's) are not Gecko: the reader says so (ReadInfo::processed) and the
//    caller serves them as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/profile.h"

namespace fxprof::exporter {

inline constexpr size_t kMaxInflateRatio = 200;  // profiles compress 8-30x; bombs ~1000x
inline constexpr size_t kMaxInflatedBytes = size_t{16} << 30;

struct ReadInfo {
  bool gzip = false;       // by magic, not by name
  bool processed = false;  // a processed-format profile (meta.preprocessedProfileVersion): not read
};

// How much text is read (or inflated) at a time.
inline constexpr size_t kReadChunkBytes = size_t{1} << 20;

// Reads a Gecko profile file into a model. With info->processed set, the profile is returned empty.
Result<model::Profile> read_gecko_profile(const std::string& path, ReadInfo* info = nullptr);

// The same from JSON text in memory, handed to the reader `chunk_bytes` at a time (1 puts a chunk border
// at every byte: the tests' and the fuzzer's way to check that no border changes what is read). `name`
// prefixes error messages.
Result<model::Profile> read_gecko(std::string_view json, const std::string& name, ReadInfo* info = nullptr,
                                  size_t chunk_bytes = kReadChunkBytes);

// A whole profile file's text (gzip inflated, several members too, within the limits above), with the
// same early checks and errors. For tests and small files: the reader never holds the whole text.
Result<std::string> read_profile_bytes(const std::string& path, bool* was_gzip = nullptr);

// "truncated JSON", "empty file" or "not valid JSON (<reason>)" for JSON text that failed to parse.
std::string describe_json_error(std::string_view text, int simdjson_error);

}  // namespace fxprof::exporter
