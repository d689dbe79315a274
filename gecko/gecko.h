// fxprof gecko: writes a model::Profile as a Gecko profile (meta.version 36), the stable format the
// Firefox Profiler imports (see ../shared/docs/firefox-profiler-format.md, our spec).
//
// Layout decisions:
//  - processes[0] is the top level (its meta, libs, threads); every other process is one entry of the
//  top-level
//    `processes` list, one level deep (the importer walks only one level), with its own libs and startTime.
//  - Each process's main thread is named "GeckoMain" with processName = the process name: the front end then
//    draws it as the process track with the other threads under it.
//  - The model interns stacks and frames profile-wide; Gecko wants per-thread tables. Each thread gets the
//    subset its samples use, renumbered in increasing global order, which keeps every prefix before its
//    stack.
//  - User frames are written as "0x<address>" (symbolicated lazily by our server); kernel frames are already
//    named "name (in [kernel.kallsyms])" in the Kernel category; labels are plain names. Frames symbolicated
//    on the model (model/symbols.h) are "function (in lib)" with the line in the `line` column, and those
//    left unresolved in a known binary "0x<binary-relative address> (in lib)". Gecko has no place for a
//    native frame's file or inline depth (format doc 1.6): three extra frameTable columns (kFileColumn...)
//    carry them for our own reader; the front end maps columns by schema and ignores them.
//  - Libs are sorted by start, and a mapping overlapping an earlier one is dropped (the front end
//  binary-searches).
//  - Samples are written sorted by time (a stable sort): unsorted times load but show an empty call tree.
//  - Streaming: nothing is built as a JSON tree; cost is a few µs per sample (the target is ≤ 2–5 µs, against
//    47–110 µs/sample for perf's gecko.py).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/critical_path.h"
#include "model/profile.h"
#include "sinks/output.h"

namespace fxprof::gecko {

inline constexpr int kGeckoVersion = 36;
// Our frameTable columns (see above).
inline constexpr const char* kFileColumn = "fxprofFile";                // string index or null
inline constexpr const char* kInlineDepthColumn = "fxprofInlineDepth";  // 0 = not inlined
inline constexpr const char* kAddressColumn = "fxprofAddress";          // binary-relative, or null
// Entries of meta.extra "Stack walking" for stacks recovered heuristically through code without CFI.
inline constexpr std::string_view kStackWalkFramePointer = "Through code without CFI by frame pointers";
inline constexpr std::string_view kStackWalkScanned = "Through code without CFI by stack scanning";
// The meta.extra section of model::Meta::data_quality (one entry per problem: label, count).
inline constexpr std::string_view kDataQuality = "Data quality";

// The main thread of a process entry whose pid a later entry has (it exec'd) is written as its process name
// with this suffix, not "GeckoMain": all entries of a pid share it, the last one's main thread is the
// process track (gecko.cpp, PidLabel).
inline constexpr std::string_view kBeforeExec = " (before exec)";

// A thread named like its process (node's and CPython's threads keep the program's name: seven "node" tracks
// otherwise) is written "NAME (tid N)", so that its track tells it from its siblings; the reader takes the
// suffix off again.
inline constexpr std::string_view kTidSuffix = " (tid ";

// Threads made from the recorded ones (model::SyntheticThread: the critical-path tracks), each written after
// the recorded threads of its process with "fxprofSynthetic": true (kSyntheticKey), never the busiest one;
// the reader leaves them out.
using Synthetic = std::span<const model::SyntheticThread>;
inline constexpr std::string_view kSyntheticKey = "fxprofSynthetic";

// Writes `profile` to `path` (gzip when it ends in ".gz"), through a temporary file renamed on success.
Status write_gecko_profile(const model::Profile& profile, const std::string& path, Synthetic synthetic = {});
// The same into `out` (sinks::OutputFile::in_memory for an upload), finished here.
Status write_gecko_profile(const model::Profile& profile, sinks::OutputFile& out, Synthetic synthetic = {});

// Streams the Gecko JSON of `profile` into `w`.
void write_gecko(const model::Profile& profile, JsonWriter& w, Synthetic synthetic = {});

// The index the front end's Gecko importer gives the busiest thread of `profile` as write_gecko writes it
// (the top process's threads in the order written, then each child process's): the most CPU time, else the
// most samples; nullopt for a profile without threads.
std::optional<size_t> gecko_busiest_thread(const model::Profile& profile, Synthetic synthetic = {});

// The front end's view state for `profile`, as URL query parameters ("v=7&thread=N", or "" without threads).
// `thread` selects the busiest thread; and a URL that selects a thread is one whose track visibility the
// front end takes from the URL (none hidden) instead of hiding every thread under 5% of the busiest one's
// CPU (src/actions/receive-profile.ts, finalizeFullProfileView): a sleeper, a pipe reader, the threads a
// wall-clock profile is for, all show when it opens. The compare view needs it too: each of its profiles
// must select a thread. For `profile` as it is written now (with `synthetic`).
std::string gecko_view_query(const model::Profile& profile, Synthetic synthetic = {});
// The same for the file `read_back` was read from, served as it is: the thread its writer chose
// (meta.selected_thread, whose index counts the synthetic threads the reader left out), else as above.
// Not for a profile read back and written again: that file selects its own busiest thread.
std::string file_view_query(const model::Profile& read_back);
// The same for a thread index already known ("v=7&thread=c": the URL version and the thread in its encoding).
std::string view_query_for_thread(uint64_t thread);
// A number as the front end's URL state writes it (its uintarray encoding: 12 is "c", 40 is "x8").
std::string url_uint(uint64_t value);

}  // namespace fxprof::gecko
