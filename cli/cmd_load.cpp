// `fxprof load`: serve a saved profile again, with symbolication, like `samply load` (profiler-cli's
// --with-samply runs `<binary> load --no-open FILE` and waits for the profiler URL on its output).
#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/signals.h"
#include "base/temp_dir.h"
#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/profile_input.h"
#include "gecko/gecko.h"
#include "gecko/gecko_reader.h"
#include "pipeline/symbolicate.h"
#include "server/server.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof load [OPTIONS] FILE\n"
    "\n"
    "Serves a saved profile (.json or .json.gz) on 127.0.0.1 with symbol lookups for its libraries, and "
    "opens\n"
    "the Firefox Profiler on it. Stops with Ctrl+C; the file is left as it is. A perf.data file or a pprof\n"
    "profile (.pb.gz, .pb) is imported as `fxprof import` does and served from a temporary copy.\n"
    "\n";

// What the libraries' reading thread tells the command: the head read (serving may start), or the end.
class LibsReading {
 public:
  struct State {
    bool head = false, done = false, processed = false, presymbolicated = false;
    uint64_t selected_thread = 0;  // the busiest thread, as the file's meta says (else the first)
    std::string error;             // the read's, when it ended before its head
  };
  void head(const model::Meta& meta) {
    std::lock_guard<std::mutex> lock(mu_);
    state_.head = true;
    state_.presymbolicated = meta.presymbolicated;
    state_.selected_thread = meta.selected_thread.value_or(0);
    cv_.notify_all();
  }
  // True when the head had been read (the profile is being served).
  bool done(std::string error, bool processed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!state_.head) state_.error = std::move(error);
    state_.processed = processed;
    state_.done = true;
    cv_.notify_all();
    return state_.head;
  }
  // Waits for the head or the end (processed-format profiles and failures have no head).
  State wait_head() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return state_.head || state_.done; });
    return state_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  State state_;
};

constexpr std::string_view kCommand = "load";

// Parses the arguments into opts and file: nullopt to go on, else the exit status.
std::optional<int> parse_load_args(std::span<char*> args, server::ServeOptions& opts, std::string& file) {
  const Command command{
      kCommand,
      kUsage,
      {
          {"-n", "--no-open", "", "do not open a browser; print the Firefox Profiler URL on stdout",
           set(opts.open_browser, false)},
          address_option(opts.address, "address to serve on (default 127.0.0.1)"),
          {"-P", "--port", "PORT",
           "port to serve on (default 3000 or the next free one up to 3099;\n"
           "a port given here is used or it is an error; 0 = any free port)",
           number("--port", {0, 65535, "a port number", true},
                  [&](double n) {
                    opts.port = static_cast<int>(n);
                    opts.port_exact = true;
                  })},
          symbol_dir_option(opts.symbols.symbol_dirs),
      },
      one_operand(file, "profile file")};
  if (auto exit = parse_options(command, args)) return *exit;
  if (file.empty()) return usage_error(kCommand, "which profile? give a .json or .json.gz file");
  return std::nullopt;
}

// The reading thread's work: the file's libraries (not the samples) registered with `symbols` as they are
// read, the head announced to `reading` first.
void read_libs(std::stop_token stop, const std::string& file, symbolizer::Symbolizer& symbols,
               LibsReading& reading) {
  // Ctrl+C is the serving thread's (serve_profile waits for it with sigtimedwait), never this one's.
  const sigset_t ended_by = stop_signals();
  pthread_sigmask(SIG_BLOCK, &ended_by, nullptr);
  gecko::ReadInfo info;
  info.libs_only = true;
  info.stop = stop;
  info.on_head = [&](const model::Profile& head) {
    for (auto& lib : pipeline::known_libs(head)) symbols.add_known_lib(std::move(lib));
    reading.head(head.meta);
  };
  auto libs = gecko::read_gecko_profile(file, &info);
  if (libs)
    for (auto& lib : pipeline::known_libs(*libs)) symbols.add_known_lib(std::move(lib));
  // After the head, the profile is being served: a bad end is said on one line (the front end refuses
  // such a file too), and the libraries read so far are still served.
  const bool served = reading.done(libs ? std::string() : libs.error(), info.processed);
  if (!libs && served && !stop.stop_requested())
    std::fprintf(stderr, "fxprof: %s (libraries after that point are not served)\n", libs.error().c_str());
  symbols.libs_complete();  // after the line: a request that waited for the end finds it said
}

// A self-contained profile with --symbol-dir: read whole, its frames resolved with the given folders; when
// some were, that copy (in `resolved`) is what opts serves. The exit status on failure.
std::optional<int> bake_whole(const std::string& file, server::ServeOptions& opts,
                              std::optional<TempFolder>& resolved) {
  auto profile = gecko::read_gecko_profile(file);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  opts.view = gecko::gecko_view_query(*profile);  // every thread shown, the busiest selected
  opts.libs = pipeline::known_libs(*profile);
  symbolizer::Symbolizer baking(opts.symbols);
  if (pipeline::symbolicate(*profile, baking).resolved > 0) {
    resolved.emplace("fxprof-load");
    if (resolved->path().empty()) {
      std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
      return 1;
    }
    const std::string tmp = resolved->path() + "/profile.json";
    if (auto s = gecko::write_gecko_profile(*profile, tmp); !s) {
      say(s.error());
      return s.exit_code();
    }
    opts.kept_path = file;  // the copy is removed at the end: the user's file is what stays
    opts.profile_path = tmp;
  }
  opts.symbolizer = nullptr;
  return std::nullopt;
}

// A perf.data file or pprof profile: imported (names left to the symbol server), written to a temporary
// Gecko profile, served.
int serve_imported(const std::string& file, server::ServeOptions& opts) {
  InputOptions in;
  in.symbols = opts.symbols;
  in.symbolicate = false;
  auto profile = load_profile_for_sinks(file, in);
  if (!profile) {
    say(profile.error());
    return profile.exit_code();
  }
  TempFolder tmp("fxprof-load");
  if (tmp.path().empty()) {
    std::fprintf(stderr, "fxprof: cannot make a temporary folder\n");
    return 1;
  }
  opts.profile_path = tmp.path() + "/profile.json";
  if (auto s = gecko::write_gecko_profile(*profile, opts.profile_path); !s) {
    say(s.error());
    return s.exit_code();
  }
  opts.libs = pipeline::known_libs(*profile);
  opts.view = gecko::gecko_view_query(*profile);
  profile = Error{};  // free the model before serving
  symbolizer::Symbolizer symbols(opts.symbols);
  opts.symbolizer = &symbols;
  if (auto s = server::serve_profile(opts); !s) {
    say(s.error());
    return s.exit_code();
  }
  return 0;
}

}  // namespace

int cmd_load(std::span<char*> args) {
  server::ServeOptions opts;
  std::string file;
  if (auto exit = parse_load_args(args, opts, file)) return *exit;
  if (is_imported_input(file)) return serve_imported(file, opts);
  opts.profile_path = file;
  std::optional<TempFolder> resolved;  // the profile served after resolving more symbols, removed at the end
  // A self-contained profile has no server to ask: with --symbol-dir, it is read whole (its frames are
  // resolved with the given folders and that copy is served); it is found out below, from its head.
  bool read_whole = false;
  // Otherwise only what a symbol server needs is read, the libraries (not the samples), on a thread of its
  // own: serving starts once the head (meta, the main process's libraries) is read, whatever the size, and
  // the libraries of the other processes follow; a request for one not read yet waits for it.
  symbolizer::Symbolizer symbols(opts.symbols);
  LibsReading reading;
  symbols.expect_more_libs();
  std::jthread reader([&](std::stop_token stop) { read_libs(stop, file, symbols, reading); });
  const LibsReading::State head = reading.wait_head();
  if (!head.error.empty()) {  // failed before its head: nothing is served
    std::fprintf(stderr, "fxprof: %s\n", head.error.c_str());
    return 1;
  }
  opts.symbolizer = &symbols;
  if (!head.processed) {  // processed-format profiles (samply's) are served as they are, inspected there
    opts.libs.emplace();  // registered above, as they are read
    // Every thread shown (any view state does it), the busiest selected as record chose it (the samples are
    // not read: the file's meta says which).
    opts.view = gecko::view_query_for_thread(head.selected_thread);
    read_whole = head.presymbolicated && !opts.symbols.symbol_dirs.empty();
  }
  if (read_whole) {
    reader.request_stop();
    reader.join();
    if (auto exit = bake_whole(file, opts, resolved)) return *exit;
  }
  if (auto s = server::serve_profile(opts); !s) {
    say(s.error());
    return s.exit_code();
  }
  return 0;
}

}  // namespace fxprof::cli
