// fxprof symbolizer: resolves lib-relative addresses to function names, files, lines and inlined frames from
// ELF symbol tables and DWARF, lazily, and answers the Firefox Profiler's JSON APIs (/symbolicate/v5,
// /source/v1, /asm/v1) as plain functions: request JSON in, response JSON out. The server only routes.
//
// (The design notes and numbers that shaped it are written by the symbolizer's implementation; see README.)
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
  std::vector<std::string> symbol_dirs;   // --symbol-dir, searched for <debugName> and debug files
  size_t cache_limit_bytes = size_t{1} << 30;  // bound on memory held by indexed libraries
};

// What a profile says about a library (its `libs` entries): how to find the file for a (debugName, breakpadId).
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
