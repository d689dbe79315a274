// fxprof model: symbolication on the model. The model hands out the addresses its samples use, per binary;
// whoever symbolizes them (symbolizer/, through passes/) answers with plain data; the model applies it.
//
// Design (the same rules as the Firefox Profiler front end, so a baked profile shows what a live one would;
// ../shared/docs/firefox-profiler-format.md 1.4 and 1.6):
//  - A native address is located in *its process's* mappings (Process::libs, sorted by start, a mapping
//    overlapping an earlier one dropped, exactly as the Gecko writer lists them); relative address =
//    address - (start - offset). Mappings are interned into profile-wide Binary entries keyed by
//    (debugName, breakpadId), so one binary used by 100 processes is looked up once.
//  - Return addresses (frames used as a caller, i.e. a prefix of a used stack) are looked up at relative - 1,
//    the call instruction; a sampled leaf keeps its exact address. A frame used in both roles may get two
//    different answers and so two different chains.
//  - Only what samples use is asked: the stacks reachable from samples, not every frame ever interned (a
//    23 ms program's recording interns frames its samples never kept), each distinct address once.
//  - apply() rebuilds the frame and stack tables (a fresh prefix tree, still topological): a resolved frame
//    becomes its function chain, outermost first, inline depth 0..n, with file and line; a frame in a known
//    binary that stays unresolved becomes binary-relative (process-independent: what a shared profile
//    needs); frames outside every mapping, kernel frames and labels stay as they are. Frames that are
//    already named are never asked again, so a baked profile loaded back asks only for what is missing.
//  - JIT code (Process::jit, named by the runtime's perf map or jitdump) is one more kind of mapping, of a
//    pseudo-binary per process without a build ID: name_jit_frames() (model/jit_names.cpp) names its frames
//    from the process's table, by time (the recorder calls it; nothing else could: the tables are not in
//    the saved file), and they are never asked of a symbol server.
//  - Numbers: a 100k-sample profile of a real program uses ~5k distinct addresses; planning and applying
//    cost ~O(stacks + samples) with one hash lookup per new stack node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/profile.h"

namespace fxprof::model {

// One function of a symbolized address. A Symbol is the chain at one address, outermost function first (the
// function the address is in, then what is inlined into it); an empty Symbol means "not found".
struct SymbolFrame {
  std::string function;
  std::string file;   // "" = unknown
  uint32_t line = 0;  // 0 = unknown
};
using Symbol = std::vector<SymbolFrame>;

// The distinct relative addresses to look up in one binary, sorted; answers[i] goes with addresses[i].
struct SymbolRequest {
  BinaryId binary = kNoBinary;
  std::vector<uint64_t> addresses;
  std::vector<Symbol> answers;  // filled by the caller; left empty (or short) = nothing found
};

// Interns the binaries of every mapping and returns, per symbolicatable binary, the addresses that the
// samples use and that are not named yet. Binaries without a debugName/breakpadId are never asked.
std::vector<SymbolRequest> symbol_requests(Profile& profile);

// Applies the answers (see the header comment). Sets nothing in meta: baking (presymbolicated) is the
// caller's decision. RequestedBinaries leaves the frames of every other binary exactly as they are (raw
// absolute addresses stay raw, for the front end to symbolicate lazily).
enum class ApplyTo { AllBinaries, RequestedBinaries };
void apply_symbols(Profile& profile, const std::vector<SymbolRequest>& requests,
                   ApplyTo scope = ApplyTo::AllBinaries);

// JIT code (Process::jit): names the frames the samples (markers, allocations) have there, from the
// process's own table, as frames of the pseudo-library jit_lib() (relative address = absolute address).
// Runtimes reuse addresses, so a frame is named after the code that was at its address at its sample's
// time: of the entries covering the address (a return address: the address - 1), the one loaded last at or
// before that time and not moved or unloaded by then; else (the sample came before any entry was seen:
// perf map lines are stamped when read) the earliest loaded after it; else the last one gone. A caller
// frame at the first byte of a named function with nothing named just before it is no return address (a
// stale pointer the stack scan took for one, below Python 3.13's trampolines) and is dropped. A stack whose
// JIT addresses were only ever used by one function each is renamed once for all its samples. The
// recorder calls it once the tables are read, so that every later path (the Gecko file served lazily, a
// baked profile, the exports) shows the names: the runtime's map files are not there any more when the
// profile is loaded. Frames of every other binary are left untouched. Within the process's libs, a lib
// wins.
void name_jit_frames(Profile& profile);
// The pseudo-library of a process's JIT code: named after the file the names came from, no build ID (so
// never sent to a symbol server).
Lib jit_lib(const Process& process);

// The mappings of a process as the front end sees them: sorted by start, empty ones and any mapping
// overlapping an earlier one dropped (the front end binary-searches them). The Gecko writer writes these.
std::vector<const Lib*> disjoint_libs(const Process& process);

}  // namespace fxprof::model
