// fxprof symbolizer: resolves lib-relative addresses to function names, files, lines and inlined frames from
// ELF symbol tables and DWARF, lazily, and hands out a library's source files and disassembly. Plain data in
// and out: the JSON APIs (/symbolicate/v5, /source/v1, /asm/v1) are the server's (server/api_*.cpp).
//
// Design (numbers: bench/symbolize.sh on this shared 2-core VM, CPU time, 10,000 random addresses, same run):
//  - Lazy: a library is opened on the first request naming it (key debugName/BREAKPADID), or by preload()
//    (record loads the binaries a program maps while it runs), indexed once, and kept in an LRU cache bounded
//    by Options::cache_limit_bytes (cache.h); concurrent requests for one library wait for a single load,
//    then share it (one lock per library: libdw is not thread-safe, and names are interned lazily).
//  - Never wrong names: a file is used only if its GNU build ID gives the requested breakpadId. Candidates
//    (load.cpp): the recorded path, --symbol-dir entries, then the debug file through elf/'s one locator
//    (build-ID trees, .gnu_debuglink with CRC, --symbol-dir, debuginfod). A rebuilt binary is "not found".
//  - Symbols: .symtab and .dynsym (and the debug file's), "foo@plt" stubs from .rela.plt, .gnu_debugdata
//    (MiniDebugInfo, xz) when no debug file exists: one sorted array, binary search. libLLVM-14 (34k
//    symbols): cold 49 ms vs llvm-symbolizer 172 ms (0.28x); warm 3.5 M addresses/s through the JSON API.
//  - Stripped binaries: an address no symbol or DWARF function names is grouped by the .eh_frame FDE that
//    covers it (read by elf/cfi.h's reader, lazily): function "0x<FDE start>" (lib-relative, as the
//    front end names an unsymbolicated address) with the FDE's start and size, so the call tree and /asm/v1
//    see one function per FDE. An address no FDE covers stays unknown.
//  - Compressed DWARF (Debian's -dbg files): the sections a lookup reads are inflated by libdeflate into one
//    image that libdw reads (dwarf_image.h), not every section by libdw's zlib: libc6-dbg's debug file opens
//    in about half the CPU time (8.5 MB inflated, not 10; no location lists), in 2 MiB pages.
//  - DWARF: compile-unit ranges read once through libdw; each unit touched is indexed once: its line program
//    decoded by our own decoder (line_program.h: libdw's dwarf_getsrclines cost 300 ns a row, most of a cold
//    request) into a flat sorted table, and its functions and inlines (libdw DIE walk) flattened into
//    disjoint "deepest inline" segments. An address then costs two binary searches and a parent walk; a
//    request's addresses are resolved in address order (cache-friendly), each distinct one once (lookup.cpp).
//    On an 18 MB -O2 -g C++ binary: cold 212 ms vs llvm-symbolizer 518 ms (0.41x); warm 1.2 M addresses/s
//    through the JSON API, whose answer there is 870 bytes per address (template inline chains).
//  - Names are demangled here (demangle.cpp: libiberty for Rust, __cxa_demangle for C++), since the front end
//    shows them as given, and interned per library with their JSON string literal, made once: resolve()
//    answers with pointers to them, so the server writes a frame's names by copying bytes (lookup() copies
//    them into plain strings for everyone else).
//  - source() serves only files named by the line table of the unit at that address (compared after lexical
//    normalization, so "../" cannot escape), opened without following symlinks (the folder's owner could
//    swap the file for a link to /etc/shadow), regular files only, read with a 64 MiB cap; disassemble()
//    decodes the binary's own bytes with capstone (Intel syntax).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/result.h"

namespace fxprof::symbolizer {

struct Options {
  std::vector<std::string> symbol_dirs;        // --symbol-dir, searched for <debugName> and debug files
  size_t cache_limit_bytes = size_t{1} << 30;  // bound on memory held by indexed libraries
  // Roots of the gdb debug-file conventions: <root>/.build-id/xx/rest.debug and <root>/<dir of
  // binary>/<link>.
  std::vector<std::string> debug_dirs = {"/usr/lib/debug"};
  bool use_debuginfod = true;  // only when DEBUGINFOD_URLS is set in the environment
  // False: names from the symbol tables only, no DWARF (no lines, no inlined frames). `fxprof agent`: a
  // fleet engine shows functions, and a build's unstripped programs' line tables, re-read as they come and
  // go, were most of its CPU (and what pushed its symbols out of the cache).
  bool dwarf = true;
};

// What a profile says about a library (its `libs` entries): how to find the file for a (debugName,
// breakpadId).
struct KnownLib {
  std::string debug_name;
  std::string breakpad_id;
  std::string name;
  std::string path;
  std::string debug_path;
  std::string code_id;
  std::string arch;
  bool operator==(const KnownLib&) const = default;
};

// A function of a stripped binary without symbols is named after its .eh_frame FDE: "<debugName>+0x<start>"
// (start lib-relative, lower-case hex). Such a name is asked again when symbols may have come since.
std::string fde_function_name(std::string_view debug_name, uint64_t start);
bool is_fde_function_name(std::string_view name, std::string_view debug_name);

struct InlineFrame {
  std::string function;
  std::string file;
  uint32_t line = 0;  // 0 = unknown
};

struct SymbolInfo {
  bool found = false;
  std::string function;          // demangled
  uint64_t function_offset = 0;  // address - function start (exact)
  uint64_t function_size = 0;    // 0 = unknown
  std::string file;              // of the outermost function at this address
  uint32_t line = 0;
  std::vector<InlineFrame> inlines;  // innermost first, as /symbolicate/v5 wants
};

// A function name or file path as a library interns it: its text and its JSON string literal (quotes
// included), each made once per library.
struct Name {
  std::string text;
  std::string json;
};

// resolve()'s answer: pointers into the library's interned names, kept alive by `library` (an eviction
// meanwhile frees nothing they point to).
struct Resolution {
  struct Frame {
    const Name* function = nullptr;  // nullptr = unknown
    const Name* file = nullptr;      // nullptr = unknown
    uint32_t line = 0;               // 0 = unknown
  };
  struct Address {
    bool found = false;
    const Name* function = nullptr;  // set when found
    uint64_t function_offset = 0;
    uint64_t function_size = 0;  // 0 = unknown
    const Name* file = nullptr;
    uint32_t line = 0;
    uint32_t inline_begin = 0;  // this address's inlined frames: inlines[inline_begin, +inline_count),
    uint32_t inline_count = 0;  // innermost first
  };
  std::vector<Address> addresses;  // addresses[i] answers the i-th address asked
  std::vector<Frame> inlines;
  std::shared_ptr<const void> library;
};

// Why source() or disassemble() has no answer; the server turns the kind into an HTTP status.
struct Refusal {
  enum Kind { kNotFound, kForbidden, kTooLarge, kUnsupported };
  Kind kind = kNotFound;
  std::string message;  // one line
};
template <class T>
class [[nodiscard]] Answer {
 public:
  Answer(T value) : v_(std::move(value)) {}            // NOLINT: implicit, as Result
  Answer(Refusal refusal) : v_(std::move(refusal)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const Refusal& refusal() const { return std::get<1>(v_); }

 private:
  std::variant<T, Refusal> v_;
};

struct Disassembly {
  uint64_t size = 0;   // bytes decoded (at least the size asked, up to the function's end if asked)
  std::string arch;    // "x86_64", "x86", "aarch64"
  std::string syntax;  // "Intel", "ARM"
  std::vector<std::pair<uint64_t, std::string>> instructions;  // (offset from start, text); "(bad)" bytes
};
// The most disassemble() decodes at once.
inline constexpr uint64_t kMaxDisassemblyBytes = 1 << 20;

// The calls a function makes, read from its machine code (function_calls()): what passes/locks.h needs to
// tell a program's thin lock wrapper (a body that is little more than a call to pthread_mutex_unlock,
// sem_post...) from the code that held the lock.
struct FunctionCalls {
  uint64_t start = 0, size = 0;  // the function (lib-relative): its symbol, else its .eh_frame FDE
  struct Call {
    uint64_t target = 0;  // lib-relative
    std::string name;     // the function there, demangled ("pthread_mutex_unlock@plt"); "" when unknown
  };
  std::vector<Call> calls;  // direct calls, and jumps out of the function (tail calls), in code order
  size_t indirect = 0;      // calls and jumps through a register or memory (where they go is unknown)
};

// Thread-safe: the server calls it from many threads at once; concurrent requests for the same library wait
// for one load.
// A debug file a library names that was not found or not read: what it is, so that callers group them by
// kind (a missing .gnu_debuglink file is a package to install) rather than by parsing the line.
struct MissingFile {
  enum class Kind : uint8_t {
    DebugLink,   // the .gnu_debuglink file
    DwzAlt,      // the dwz alt file (.gnu_debugaltlink)
    SplitDwarf,  // a .dwo file or a unit of its package
    NotRead,     // found, but not read (the address-space limit)
  };
  Kind kind;
  std::string text;  // one line naming the file and where it was looked for
  bool operator==(const MissingFile&) const = default;
};

class Symbolizer {
 public:
  explicit Symbolizer(Options options = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Registers where a library's file is. Registering it again as it was keeps what is already loaded (record
  // registers its binaries on each symbolication and hands the symbolizer on to the server); a different
  // entry for the same key drops it.
  void add_known_lib(KnownLib lib);

  // Resolves lib-relative addresses of one library; an Error when the library's file cannot be found or its
  // build ID does not match breakpad_id (never wrong names).
  Result<std::vector<SymbolInfo>> lookup(std::string_view debug_name, std::string_view breakpad_id,
                                         std::span<const uint64_t> addresses);
  // The same without copying names (the server's fast path).
  Result<Resolution> resolve(std::string_view debug_name, std::string_view breakpad_id,
                             std::span<const uint64_t> addresses);

  // Loads a library ahead of its lookups, as a first lookup would: its files found and checked, symbols read,
  // DWARF opened (compressed sections inflated) with its units' ranges. record calls it on a second thread
  // while the program runs, so that after the exit only lookups remain (passes/preload.h).
  Status preload(std::string_view debug_name, std::string_view breakpad_id);

  // Debug files the library names that were not found, as far as its lookups so far needed them (a
  // .gnu_debuglink, a dwz alt file, the .dwo files of split DWARF): one line each, naming the file and where
  // it was looked for, for the caller's data-quality entries. Empty for an unknown library.
  std::vector<MissingFile> missing_files(std::string_view debug_name, std::string_view breakpad_id);

  // The text of a source file of the library, only if `path` is absolute and the line table of the unit at
  // module_offset names it (after lexical normalization): kForbidden otherwise, and for a path through a
  // symlink or anything but a regular file; kNotFound for an unknown library or a missing file, kTooLarge
  // above 64 MiB.
  Answer<std::string> source(std::string_view debug_name, std::string_view breakpad_id,
                             uint64_t module_offset, std::string_view path);

  // The instructions of the binary's own bytes at [start, start + size) (lib-relative), or to the end of the
  // function at start when until_function_end (its symbol's end, else its .eh_frame FDE's) (capped at
  // kMaxDisassemblyBytes). kUnsupported for an architecture other than x86 and aarch64.
  Answer<Disassembly> disassemble(std::string_view debug_name, std::string_view breakpad_id, uint64_t start,
                                  uint64_t size, bool until_function_end);

  // The calls of the function containing `address` (lib-relative), decoded with capstone (instruction
  // boundaries: a byte scan for a call's opcode would also find it inside other instructions' operands).
  // kTooLarge for a function over `max_size` bytes (not decoded), kNotFound where no symbol or FDE names a
  // function, kUnsupported for another architecture than x86-64 or without capstone.
  Answer<FunctionCalls> function_calls(std::string_view debug_name, std::string_view breakpad_id,
                                       uint64_t address, uint64_t max_size);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fxprof::symbolizer
