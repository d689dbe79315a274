// fxprof server: serves a saved profile and the symbolication APIs on loopback, under a random token, and
// opens the Firefox Profiler on it (what `samply load` does). Also reads what a saved profile says about
// itself (its libs).
//
// Design:
//  - The server only routes: http_server.cpp is the HTTP/1.1 transport (our own: Debian's cpp-httplib 0.11.4
//    cannot bound heads or chunked bodies; all socket I/O on one non-blocking poller thread, with deadlines),
//    http_request.cpp parses requests, http_routes.cpp routes them and serves the profile file, urls.cpp
//    makes the token and the URLs; each JSON API is one file,
//    api_symbolicate_v5.cpp, api_source_v1.cpp, api_asm_v1.cpp, that parses its request (simdjson), asks the
//    symbolizer for plain data and writes the answer through base/json_writer.h, the one JSON writer.
//  - The profile is served from its file as it is: a .json.gz goes out with Content-Encoding: gzip (the
//    browser inflates it, we never recompress). Profiles run to hundreds of MB; only `load` parses them.
//  - Everything lives under /<token>/, 24 bytes from getrandom in base32 (39 characters, 120 bits): another
//    local user or a web page cannot guess it, so it cannot pull the profile or make us read files. Outside
//    the token: 404 (a short plain page at /), no CORS headers. Under it: CORS `*`, OPTIONS preflights, 16
//    MiB request bodies (413 above), malformed JSON 400 with {"error": ...}; a handler never takes the server
//    down.
//  - serve_profile() blocks SIGINT/SIGTERM and waits for them with sigtimedwait: no async-signal-unsafe code
//    runs in a handler, and it does not matter what handlers the caller (record) installed.
//  - The browser is opened on a 0600 redirect page in a 0700 folder, never on the URL itself: a command line
//    is readable by every local user (ps), and the token is the profile's only guard.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "symbolizer/symbolizer.h"

namespace fxprof::server {

struct ServeOptions {
  std::string profile_path;  // a .json or .json.gz Gecko profile
  // The file the user keeps, when profile_path is a temporary copy removed after serving (load --symbol-dir
  // serves the copy with more names): the last line names this one.
  std::string kept_path;
  std::string address = "127.0.0.1";  // --address
  int port = 3000;                    // -P/--port; 0 = any free port (the OS picks)
  bool port_exact = false;            // true when the user named a port: no trying the next ones
  bool open_browser = true;           // false with --no-open
  symbolizer::Options symbols;
  // The caller's symbolizer, already holding what it loaded (record: the libraries its summary named), used
  // instead of a new one so that no library is read twice; it must outlive serve_profile.
  symbolizer::Symbolizer* symbolizer = nullptr;
  // The libraries to answer for, when the caller already read the profile (record, load: from the model);
  // without them the file is inspected here.
  std::optional<std::vector<symbolizer::KnownLib>> libs;
  // The front end's view state the printed URL carries ("v=7&thread=N": gecko::gecko_view_query).
  std::string view;
};

// Validates the profile (a clear error for corrupt, truncated, empty or non-profile files: nothing is served
// then), registers its libs with a symbolizer, prints the Firefox Profiler URL and serves until
// SIGINT/SIGTERM. The URL goes to stdout (profiler-cli reads it there); the rest of the chatter to stderr.
Status serve_profile(const ServeOptions& options);

// ---- Pieces of the above, public for tests and for other front ends. ----

// The JSON APIs the Firefox Profiler calls, as functions: request JSON in, response JSON out. Malformed
// requests are a 400 with {"error": ...}; the symbolizer's refusals 403, 404, 413 or 422, also with an error.
struct ApiResponse {
  int http_status = 200;
  std::string body;  // JSON
};
ApiResponse symbolicate_v5(symbolizer::Symbolizer& symbols, std::string_view request_json);
ApiResponse source_v1(symbolizer::Symbolizer& symbols, std::string_view request_json);
ApiResponse asm_v1(symbolizer::Symbolizer& symbols, std::string_view request_json);

// What a saved profile says about itself: its libraries (deduplicated by debugName/breakpadId; top-level
// `libs`, every `processes[i].libs` and, for old processed profiles, every `threads[i].libs`).
struct ProfileInfo {
  std::vector<symbolizer::KnownLib> libs;
  bool gzip = false;             // by magic, not by name
  bool processed = false;        // processed format (meta.preprocessedProfileVersion), as samply writes
  bool has_local_paths = false;  // some lib path is an absolute local path
};
// Errors are one line naming the file: "profile.json.gz: truncated gzip data". Read with the Gecko reader's
// caps (gecko/gecko_reader.h: regular files only, gzip inflating beyond 200x or 16 GiB refused).
Result<ProfileInfo> inspect_profile(const std::string& path);

// https://profiler.firefox.com/from-url/<enc(profile_url)>/?symbolServer=<enc(symbol_server)>; the origin
// can be replaced with $PROFILER_URL (a self-hosted front end), as in samply. `view`: more query parameters
// of the front end's URL state ("v=7&thread=3": gecko::gecko_view_query), appended as they are.
std::string firefox_profiler_url(std::string_view profile_url, std::string_view symbol_server,
                                 std::string_view view = {});
// A fresh token: 24 bytes from getrandom in base32 (39 characters of [0-9a-z] without e, o, u, t).
std::string random_token();

// The HTTP server itself, running on its own threads until stop() or destruction.
class ProfileServer {
 public:
  struct Config {
    std::string profile_path;
    std::string address = "127.0.0.1";
    int port = 3000;  // 0: any free port
    bool port_exact = false;
    bool tcp_nodelay = true;                        // false only to measure what it buys (bench/)
    std::chrono::milliseconds head_timeout{10000};  // a request head must arrive whole within this
    std::chrono::milliseconds body_timeout{30000};  // a request body, whole (16 MiB at 0.5 MiB/s)
    // An answer must be written whole within this, plus one second per 64 KiB beyond the first 640 KiB (a
    // big profile over a slow link), or the connection is closed.
    std::chrono::milliseconds write_timeout{10000};
  };
  // Opens the profile, binds (port, port+1, ... up to 3099 unless exact) and starts serving; returns when the
  // server accepts connections. `symbols` must outlive the server.
  static Result<std::unique_ptr<ProfileServer>> start(const Config& config, symbolizer::Symbolizer& symbols);
  ~ProfileServer();  // stop()
  ProfileServer(const ProfileServer&) = delete;
  ProfileServer& operator=(const ProfileServer&) = delete;

  int port() const;
  const std::string& token() const;
  std::string origin() const;             // http://127.0.0.1:3000 ($FXPROF_SERVER_URL overrides)
  std::string symbol_server_url() const;  // origin/token
  std::string profile_url() const;        // origin/token/profile.json
  std::string profiler_url() const;       // the Firefox Profiler URL that loads it
  bool running() const;
  void stop();  // idempotent; returns once every worker thread is done

  struct Impl;
  explicit ProfileServer(std::unique_ptr<Impl> impl);  // use start()

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fxprof::server
