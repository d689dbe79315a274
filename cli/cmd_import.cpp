// `fxprof import FILE`: a perf.data file through the recorder's profile builder (recorder/perf_import.h),
// then what `record` does after a recording: name, write, summarize, serve.
#include <cstdio>
#include <optional>
#include <string>

#include "base/fd.h"
#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "gecko/gecko.h"
#include "passes/passes.h"
#include "perf/data_file.h"
#include "recorder/perf_import.h"
#include "recorder/pprof_import.h"
#include "server/server.h"
#include "sinks/output.h"
#include "sinks/report.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof import [OPTIONS] FILE\n"
    "\n"
    "Reads a perf.data file (`perf record`, -g or --call-graph dwarf, any events, -a, -p; `-` reads perf\n"
    "record -o - from standard input) or a pprof profile (profile.pb.gz or .pb, as Go, Pyroscope, Parca\n"
    "and `fxprof export pprof` write it), builds the profile `fxprof record` would have made, writes it,\n"
    "then serves it and opens the Firefox Profiler on it. A binary gone or rebuilt since perf recorded it\n"
    "is read from its copy in perf's build-ID cache ($PERF_BUILDID_DIR, ~/.debug).\n"
    "\n";

constexpr std::string_view kCommand = "import";

struct ImportArgs {
  recorder::ImportOptions import;
  server::ServeOptions serve;
  std::string input, output = "profile.json.gz";
  bool save_only = false, quiet = false;
  int symbolicate = -1;  // -1: yes with --save-only, no when serving
};

Command import_command(ImportArgs& a) {
  recorder::ImportOptions& o = a.import;
  return Command{
      kCommand,
      kUsage,
      {
          heading("Import:"),
          {"-e", "--event", "EVENT",
           "the event whose samples are the threads' samples (default: the file's\n"
           "first event with samples); each other event's samples are tracks of\n"
           "their own, \"THREAD (EVENT)\". pprof: the sample type counted as\n"
           "samples (default samples, else cpu, else the first count)",
           store(o.event)},
          {"", "--pid", "PID[,PID...]", "only these processes",
           id_list("--pid", "ids", [&o](uint32_t id) { o.pids.push_back(id); })},
          {"", "--tid", "TID[,TID...]", "only these threads",
           id_list("--tid", "ids", [&o](uint32_t id) { o.tids.push_back(id); })},
          {"", "--time-range", "START,END",
           "only samples in this range, in seconds of the file's clock as `perf\n"
           "script` prints them (either may be empty; perf.data only)",
           [&](const std::string& v) {
             const Status s = recorder::parse_time_range(v, o);
             return s ? std::string() : s.error();
           }},
          {"-v", "--verbose", "", "print what the file holds (events, records out of order, unwinding)",
           set(o.verbose, true)},
          heading("\nOutput (as for record):"),
          {"-o", "--output", "FILE", "profile file (default profile.json.gz; gzip when it ends in .gz)",
           store(a.output)},
          {"-s", "--save-only", "",
           "write the profile and exit, without serving it; the profile is made\n"
           "self-contained (symbols baked in) unless --no-symbolicate",
           set(a.save_only, true)},
          {"", "--symbolicate", "", "bake symbols into the profile", set(a.symbolicate, 1)},
          {"", "--no-symbolicate", "", "keep raw addresses (symbolicated lazily by `fxprof load`)",
           set(a.symbolicate, 0)},
          {"", "--symbol-dir", "DIR", "also look for symbol files in DIR (repeatable; also for unwinding)",
           [&](const std::string& v) {
             a.serve.symbols.symbol_dirs.push_back(v);
             o.symbol_dirs.push_back(v);
             return std::string();
           }},
          {"-q", "--quiet", "", "no top-functions line", set(a.quiet, true)},
          heading("\nServing (unless --save-only):"),
          {"-n", "--no-open", "", "do not open a browser; print the Firefox Profiler URL",
           set(a.serve.open_browser, false)},
          address_option(a.serve.address, "address to serve on (default 127.0.0.1)"),
          {"-P", "--port", "PORT", "port to serve on (default 3000 or the next free one)",
           number("--port", {1, 65535, "a port number", true},
                  [&](double n) {
                    a.serve.port = static_cast<int>(n);
                    a.serve.port_exact = true;
                  })},
      },
      one_operand(a.input, "perf.data or pprof file")};
}

// What the file held beyond the profile: the other events, and with -v how it was read.
void say_events(const ImportArgs& a, const recorder::ImportStats& st) {
  // The other events: in tracks of their own ("THREAD (EVENT)"), as many samples as the file has but the
  // idle task's and the filters'.
  for (const auto& [name, count] : st.tracked)
    std::fprintf(
        stderr,
        "fxprof: %llu samples of %s, in tracks of their own (\"THREAD (%s)\"; --event %s makes them the "
        "threads' samples)\n",
        static_cast<unsigned long long>(count), name.c_str(), name.c_str(),
        name.substr(0, name.find(':')).c_str());
  if (st.switch_outs > 0 && !st.switch_records && st.switch_ins == 0)
    std::fprintf(stderr,
                 "fxprof: the file's sched:sched_switch samples show threads leaving the CPU but not coming "
                 "back (record with --switch-events, or -a): no off-CPU waits\n");
  if (!a.import.verbose) return;
  std::fprintf(stderr,
               "fxprof: %s: %llu samples of %s in the file, %s stacks; %llu records out of time order (kept, "
               "sorted), %llu perf records not read; kernel names %s\n",
               a.input.c_str(), static_cast<unsigned long long>(st.file_samples), st.event.c_str(),
               st.dwarf ? "DWARF-unwound" : "frame-pointer", static_cast<unsigned long long>(st.out_of_order),
               static_cast<unsigned long long>(st.dropped),
               st.kernel_names ? "from this machine's kallsyms" : "not available (another kernel)");
}

// A profile, the summary line's figures, and the threads of the file's other events (for the tracks).
struct Imported {
  model::Profile profile;
  std::string summary;
  std::vector<std::pair<size_t, size_t>> tracks;
};

Result<Imported> import_perf(const ImportArgs& a) {
  auto file = perf::DataFile::read(a.input);
  if (!file) return std::move(file).take_error();
  recorder::ImportOptions o = a.import;
  o.event_tracks = true;  // the other events' samples, each in its tracks
  auto imported = recorder::import_perf_data(*file, o);
  file = Error{};  // the records are in the model now
  if (!imported) return Err(a.input + ": " + imported.error());
  const recorder::ImportStats& st = imported->stats;
  say_events(a, st);
  char line[256];
  std::snprintf(line, sizeof line, "%.2f s, %llu samples of %s, %u threads, %u processes, %llu lost records",
                st.duration_s, static_cast<unsigned long long>(st.samples), st.event.c_str(), st.threads,
                st.processes, static_cast<unsigned long long>(st.lost_records));
  std::string summary = line;
  if (st.off_cpu_spans > 0)
    summary += ", " + std::to_string(st.off_cpu_spans) + " off-CPU spans (" +
               std::to_string(st.off_cpu_samples) + " off-CPU samples)";
  return Imported{std::move(imported->profile), summary, std::move(imported->tracks)};
}

// A pprof profile: its sample types said, the counted one named.
Result<Imported> import_pprof(const ImportArgs& a) {
  auto imported = recorder::import_pprof_file(a.input, a.import);
  if (!imported) return std::move(imported).take_error();
  const recorder::PprofStats& st = imported->stats;
  if (a.import.verbose) {
    std::string types;
    for (const std::string& t : st.types) types += (types.empty() ? "" : ", ") + t;
    std::fprintf(stderr, "fxprof: %s: pprof sample types %s\n", a.input.c_str(), types.c_str());
  }
  std::string line =
      "pprof: " + std::to_string(st.samples) + " samples" + (st.counted.empty() ? "" : " of " + st.counted);
  if (st.off_cpu_samples) line += ", " + std::to_string(st.off_cpu_samples) + " off-CPU";
  if (st.allocations) line += ", " + std::to_string(st.allocations) + " allocation rows";
  line += ", " + std::to_string(st.threads) + " threads, " + std::to_string(st.processes) + " processes";
  return Imported{std::move(imported->profile), line, {}};
}

Result<Imported> import_file(const ImportArgs& a) {
  if (a.input != "-" && recorder::is_pprof_file(a.input)) return import_pprof(a);
  return import_perf(a);
}

}  // namespace

int cmd_import(std::span<char*> args) {
  ImportArgs a;
  if (auto exit = parse_options(import_command(a), args)) return *exit;
  if (a.input.empty())
    return usage_error(kCommand, "which file? give a perf.data or pprof FILE (or - for a perf pipe)");
  auto kind = AtomicFile::check(a.output);
  if (!kind) {
    std::fprintf(stderr, "fxprof: %s\n", kind.error().c_str());
    return 1;
  }
  if (*kind == OutputKind::kStream && !a.save_only)
    return usage_error(kCommand,
                       a.output + " is not a regular file: add --save-only to write the profile to it");

  auto imported = import_file(a);
  if (!imported) {
    std::fprintf(stderr, "fxprof: %s\n", imported.error().c_str());
    return 1;
  }
  model::Profile& profile = imported->profile;

  // The passes `record` runs (passes/passes.h): JIT names, symbols when baked, lock holders, the
  // critical-path tracks.
  symbolizer::Symbolizer symbols(a.serve.symbols);
  const bool named = a.symbolicate == 1 || (a.symbolicate == -1 && a.save_only);
  passes::Options passing{&symbols, named ? passes::Naming::Baked : passes::Naming::Lazy, true};
  passing.source_tracks = std::move(imported->tracks);
  passes::Outcome passed = passes::run(profile, passing);
  std::vector<std::string> no_debug = std::move(passed.named.no_debug);  // said once, after the summary
  profile.meta.presymbolicated = named;
  if (auto s = gecko::write_gecko_profile(profile, a.output, passed.tracks); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return 1;
  }
  std::fprintf(stderr, "fxprof: imported %s -> %s\n", imported->summary.c_str(), a.output.c_str());
  if (!a.quiet) {
    if (!named) no_debug = passes::name_frames(profile, symbols).no_debug;
    if (const std::string line = passes::missing_debug_line(no_debug); !line.empty()) say(line);
    const std::string top = sinks::top_self_summary(profile, 5);
    if (!top.empty()) std::fprintf(stderr, "fxprof: top self: %s\n", top.c_str());
  }
  if (a.save_only) return 0;
  a.serve.libs = passes::known_libs(profile);
  a.serve.view = gecko::gecko_view_query(profile, passed.tracks);
  imported = Error{};  // free the model before serving
  a.serve.profile_path = a.output;
  a.serve.symbolizer = &symbols;
  if (auto s = server::serve_profile(a.serve); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return 1;
  }
  return 0;
}

}  // namespace fxprof::cli
