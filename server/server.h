// fxprof server: serves a saved profile and the symbolizer's JSON APIs on loopback, under a random token, and
// opens the Firefox Profiler on it (what `samply load` does). Also reads the libs of a saved profile and
// bakes symbols into a profile to share it (self-contained profiles).
//
// (The design notes are written by the server's implementation; see README.)
#pragma once

#include <string>

#include "base/result.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::server {

struct ServeOptions {
  std::string profile_path;            // a .json or .json.gz Gecko profile
  std::string address = "127.0.0.1";   // --address
  int port = 3000;                     // -P/--port
  bool port_exact = false;             // true when the user named a port: no trying the next ones
  bool open_browser = true;            // false with --no-open
  symbolizer::Options symbols;
};

// Validates the profile (a clear error for corrupt, truncated, empty or non-profile files: nothing is served
// then), registers its libs with a symbolizer, prints the Firefox Profiler URL and serves until SIGINT/SIGTERM.
Status serve_profile(const ServeOptions& options);

// Rewrites a saved profile with names baked in (inlined frames expanded, presymbolicated: true), so that it
// opens with no fxprof server. `in` and `out` may be the same path (written to a temp file and renamed).
Status symbolicate_profile(const std::string& in, const std::string& out, const symbolizer::Options& symbols);

}  // namespace fxprof::server
