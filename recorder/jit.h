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
// exits (EXIT of its main thread) or when recording ends, into model::Process::jit, and names the frames
// in the model at once (model::name_jit_frames). Every later path sees the names: the lazily served Gecko
// file ("name (in perf-PID.map)" frames, which the front end takes as already symbolicated), baked
// profiles, exports, `fxprof report`. Nothing is left for /symbolicate/v5 to answer.
//
// Code is reused: a runtime may free a function and put another one at its address. Both formats are
// read in file order and a later entry replaces what it overlaps (perf does the same for perf maps), so a
// profile names the code with the latest name at each address; a sample taken before the reuse may get
// the newer name. Files are opened non-blocking and must be regular files (a FIFO named like a map would
// block the recorder otherwise), not symbolic links, at most kMaxJitFileBytes, owned by the process's user or
// root and not writable by group or others (else a data-quality line names the file).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/profile.h"

namespace fxprof::recorder {

inline constexpr uint64_t kMaxJitFileBytes = uint64_t{1} << 30;

// Parses perf map text; malformed lines are skipped. Returns the entries in file order.
std::vector<model::JitCode> parse_perf_map(std::string_view text);
// Parses a jitdump image (a truncated last record, as a runtime still writing leaves it, is ignored).
// An Error when the header is not a jitdump's (wrong magic or byte order, or too short).
Result<std::vector<model::JitCode>> parse_jitdump(std::string_view image);

// Why a JIT file must not name the code of a process whose users (real, effective) are `uids`: "" when its
// owner is one of them or root and neither group nor others may write it, else the reason ("owned by user
// 1001", "writable by others"). Anyone can create /tmp/perf-PID.map before the process does: perf checks
// the owner too.
std::string jit_file_untrusted(uint32_t owner, uint32_t mode, std::span<const uint32_t> uids);

// Reads and parses the file; an Error when it does not exist, is not a regular file, or is not trusted for a
// process of `uids` (jit_file_untrusted, checked on the opened file; then `*untrusted` holds the message).
Result<std::vector<model::JitCode>> read_perf_map(const std::string& path, std::span<const uint32_t> uids,
                                                  std::string* untrusted = nullptr);
Result<std::vector<model::JitCode>> read_jitdump(const std::string& path, std::span<const uint32_t> uids,
                                                 std::string* untrusted = nullptr);

// Entries in file order -> sorted, disjoint table: a later entry replaces what it overlaps (an earlier
// entry cut by it keeps the part that does not overlap). Empty ranges are dropped.
std::vector<model::JitCode> disjoint_jit_table(std::vector<model::JitCode> in_file_order);

// "jit-1234.dump" (any folder) -> 1234; 0 when `path` is not a jitdump file name.
uint32_t jitdump_pid(std::string_view path);

}  // namespace fxprof::recorder
