// fxprof symbolizer: resolves lib-relative addresses to function names, files, lines and inlined frames from
// ELF symbol tables and DWARF, lazily, and answers the Firefox Profiler's JSON APIs (/symbolicate/v5,
// /source/v1, /asm/v1) as plain functions: request JSON in, response JSON out. The server only routes.
//
// Design (numbers: bench/symbolize.sh on this shared 2-core VM, CPU time, 10,000 random addresses, same run):
//  - Lazy: nothing is read while recording. A library is opened on the first request naming it (key
//    debugName/BREAKPADID), indexed once, and kept in an LRU cache bounded by Options::cache_limit_bytes;
//    concurrent requests for one library wait for a single load, then share it (one lock per library: libdw
//    is not thread-safe, and names are demangled lazily into per-library caches).
//  - Never wrong names: a file is used only if its GNU build ID gives the requested breakpadId. Candidates:
//    the recorded path, --symbol-dir entries; debug files from <debug_dir>/.build-id/xx/rest.debug,
//    .gnu_debuglink (CRC32 checked) beside the binary, in its .debug/ and <debug_dir>/<dir>/, then
//    debuginfod when DEBUGINFOD_URLS is set. A rebuilt binary is "not found" with a module error.
//  - Symbols: .symtab and .dynsym (and the debug file's), "foo@plt" stubs from .rela.plt, .gnu_debugdata
//    (MiniDebugInfo, xz) when no debug file exists: one sorted array, binary search. libLLVM-14 (34k
//    symbols): cold 49 ms vs llvm-symbolizer 172 ms (0.28x); warm 3.5 M addresses/s through the JSON API.
//  - DWARF: compile-unit ranges read once through libdw; each unit touched is indexed once: its line program
//    decoded by our own decoder (line_program.h: libdw's dwarf_getsrclines cost 300 ns a row, most of a cold
//    request) into a flat sorted table, and its functions and inlines (libdw DIE walk) flattened into
//    disjoint "deepest inline" segments. An address then costs two binary searches and a parent walk; a
//    request's addresses are resolved in address order (cache-friendly), each distinct one once. On an 18 MB
//    -O2 -g C++ binary: cold 212 ms vs llvm-symbolizer 518 ms (0.41x; eu-addr2line ~1000x slower still);
//    warm 1.2 M addresses/s through the JSON API, whose answer there is 870 bytes per address (template
//    inline chains).
//  - Names are demangled here (C++ via __cxa_demangle, Rust legacy without its hash, Rust v0 by our own
//    parser), since the front end shows them as given. Each name and file is JSON-escaped once and reused.
//  - The APIs are functions (request JSON in, response JSON out, simdjson): malformed input is a 400 with
//    {"error": ...}. /source/v1 serves only files named by the line table of the unit at that address
//    (compared after lexical normalization, so "../" cannot escape); /asm/v1 disassembles the binary's own
//    bytes with capstone (Intel syntax).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
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
};

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

struct ApiResponse {
  int http_status = 200;  // 400 for malformed requests, with an {"error": "..."} body
  std::string body;       // JSON
};

// Thread-safe: the server calls it from many threads at once; concurrent requests for the same library wait
// for one load.
class Symbolizer {
 public:
  explicit Symbolizer(Options options = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  void add_known_lib(KnownLib lib);

  // Resolves lib-relative addresses of one library; an Error when the library's file cannot be found or its
  // build ID does not match breakpad_id (never wrong names).
  Result<std::vector<SymbolInfo>> lookup(std::string_view debug_name, std::string_view breakpad_id,
                                         std::span<const uint64_t> addresses);

  ApiResponse symbolicate_v5(std::string_view request_json);
  ApiResponse source_v1(std::string_view request_json);
  ApiResponse asm_v1(std::string_view request_json);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fxprof::symbolizer
