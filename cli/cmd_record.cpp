// `fxprof record`: parse -> record -> passes -> sinks -> serve (cmd_record, at the end), a function each. The
// recording is recorder::record() with all of its sources (the heap pipe too: recorder/sources.h); the passes
// are passes/passes.h's list; the sinks write, summarize, export and send the model; the server serves it.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/fd.h"
#include "base/signals.h"
#include "base/terminal.h"
#include "cli/commands.h"
#include "cli/publish.h"
#include "cli/record_options.h"
#include "counters/events.h"
#include "gecko/gecko.h"
#include "model/critical_path.h"
#include "passes/kernel_time.h"
#include "passes/locks.h"
#include "passes/passes.h"
#include "passes/preload.h"
#include "recorder/markers_env.h"
#include "recorder/quality.h"
#include "recorder/recorder.h"
#include "recorder/usdt_probes.h"
#include "server/server.h"
#include "sinks/exports.h"
#include "sinks/heap_report.h"
#include "sinks/output.h"
#include "sinks/report.h"

namespace fxprof::cli {
namespace {

// A failed step after the program ran exits with the program's status when it failed, else 1.
int failure(int exit_status) { return exit_status != 0 ? exit_status : 1; }

// --usdt: the probes' hits of the processes recorded as markers, and one line saying what came of them.
void finish_usdt(std::unique_ptr<recorder::UsdtProbes>& usdt, Result<recorder::Recording>& recording) {
  if (!usdt) return;
  recorder::UsdtHits hits = usdt->finish();
  if (!recording) return;
  const recorder::UsdtMarkerStats st = recorder::add_usdt_markers(recording->profile, usdt->probes(), hits);
  std::string line = "usdt: " + std::to_string(st.hits) + " hits of";
  for (const recorder::UsdtProbeUse& p : usdt->probes())
    line += " " + p.request.provider + ":" + p.request.name;
  line += ", " + std::to_string(st.markers) + " markers";
  if (st.unmatched) line += "; " + std::to_string(st.unmatched) + " begins or ends without their partner";
  // A probe never hit (Python 3.11's function__entry never fires: CPython issue 98894) is said by name.
  for (size_t i = 0; i < usdt->probes().size(); ++i)
    if (st.per_probe[i] == 0)
      line += "; never hit: " + usdt->probes()[i].request.provider + ":" + usdt->probes()[i].request.name;
  if (st.no_thread) line += "; " + std::to_string(st.no_thread) + " on threads not recorded";
  if (const uint64_t lost = usdt->dropped(); lost > 0)
    line += "; " + std::to_string(lost) + " hits lost (the ring buffer was full: the reader fell behind)";
  if (const uint64_t over = hits.over_limit + st.over_limit; over > 0)
    line += "; " + std::to_string(over) + " hits left out (over the limit)";
  std::fprintf(stderr, "fxprof: %s\n", line.c_str());
  usdt.reset();
}

// Nothing sampled (and no heap data): an empty profile would look like a recording that worked. Say why
// instead and fail (the exit status). After a hangup nobody reads the message: the profile (processes,
// threads) is written.
std::optional<int> refuse_empty(const recorder::Options& rec, const recorder::Recording& recording) {
  const auto& st = recording.stats;
  bool allocations = false;
  for (const model::Process& proc : recording.profile.processes)
    for (const model::Thread& t : proc.threads) allocations |= !t.allocations.empty();
  // Attached to processes that never ran while their running children do the work: the wall-clock samples of
  // their waiting are not what was asked for, the children are (a process alone asleep is a real profile).
  bool idle_parents = !rec.pids.empty() && st.samples == st.off_cpu_samples;
  if (idle_parents) {
    bool kids = false;
    for (int pid : rec.pids) kids |= !recorder::descendants(pid, 1).empty();
    idle_parents = kids;
  }
  const uint64_t counted = idle_parents ? 0 : st.samples;
  if (counted == 0 && !allocations && !recording.hangup) {
    std::fprintf(stderr, "fxprof: %s\n", recorder::no_samples_message(rec, st).c_str());
    return failure(recording.exit_status);
  }
  return std::nullopt;
}

// -v: what the user waits for once the recording ends (the recorder's own finish is in its passes line).
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
// CPU time of all of fxprof's threads: the wall time is stretched by whatever else runs.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// One `record` run, handed from step to step (cmd_record below): the recording, the one symbolizer that names
// its frames for the file, the summary, the exports, the upload and the server, and what the passes made.
struct Run {
  // Unless the frames stay raw, it loads the binaries' symbols while the program runs (passes/preload.h):
  // after the exit only lookups remain.
  std::optional<symbolizer::Symbolizer> symbols;
  std::optional<passes::SymbolPreloader> preloader;
  size_t preloaded = 0;  // binaries it loaded while the program ran
  std::optional<recorder::Recording> recording;
  // A Ctrl-C while the profile is written must not leave a temporary file behind: SIGINT/SIGTERM are held
  // from the recording's end until the file is complete, then a pending one means "do not serve".
  std::optional<SignalsBlocked> hold;
  std::vector<model::SyntheticThread> tracks;  // the passes' critical-path tracks, for the Gecko writer
  std::vector<std::pair<const char*, double>> pass_ms;
  // The frames named (passes::name_frames: only the addresses samples use, and the Lock wait markers'
  // "Held by"), once, for whichever of the file, the summary and the upload asks first; timed for -v.
  passes::SymbolicateStats named;
  std::vector<std::string> no_debug;  // binaries without their debug file: one line in the summary
  double naming_ms = 0;
  bool frames_named = false;
  // The heap summary's figures, made beside the writer when the file is baked.
  std::future<sinks::HeapReport> heap_report;
  Clock::time_point ended;  // -v: from the recording's end
  double cpu_at_end = 0;

  bool pending() const { return hold->pending(); }
  model::Profile& profile() { return recording->profile; }
  int failure() const { return cli::failure(recording->exit_status); }
  void name_frames() {
    if (frames_named) return;
    frames_named = true;
    const Clock::time_point t = Clock::now();
    named = passes::name_frames(profile(), *symbols);
    no_debug.insert(no_debug.end(), named.no_debug.begin(), named.no_debug.end());
    naming_ms = ms_since(t);
  }
};

// Record: the recording with its sources (the heap pipe with --heap: recorder/sources.h), the USDT probes
// and the program's marker files; refused when it holds nothing. The exit status when it ends here.
std::optional<int> record(RecordArgs& a, Run& run) {
  recorder::Options& rec = a.rec;
  // --usdt: attached before the program starts (its first hits count), or refused before it runs.
  std::unique_ptr<recorder::UsdtProbes> usdt;
  if (!a.usdt.empty()) {
    auto u = recorder::UsdtProbes::start(recorder::command_path(rec.command[0]), a.usdt, a.usdt_pair);
    if (!u) {
      say(u.error());
      return 1;
    }
    usdt = std::move(*u);
  }
  run.symbols.emplace(a.serve.symbols);
  if (a.symbolicate != 0) {
    run.preloader.emplace(*run.symbols);
    rec.on_binary_sampled = [&run](const model::Lib& lib) { run.preloader->mapped(lib); };
  }
  // The program launched writes its markers where the recorder reads them (recorder/markers_env.h).
  std::optional<recorder::MarkerEnvironment> markers;
  if (!rec.command.empty()) {
    markers.emplace();
    for (const std::string& note : markers->notes()) say(note);
  }
  auto recording = recorder::record(rec);
  markers.reset();
  if (run.preloader) run.preloaded = run.preloader->stop();
  finish_usdt(usdt, recording);
  if (!recording) {
    say(recording.error());
    return recording.exit_code();
  }
  if (auto exit = refuse_empty(rec, *recording)) return *exit;
  run.recording.emplace(std::move(*recording));
  run.hold.emplace(SignalsBlocked::Pending::Drop);
  return std::nullopt;
}

// Passes (passes/passes.h): JIT names over every stack the recorder and the heap made, symbols when baked,
// lock holders, critical-path tracks.
void run_passes(const RecordArgs& a, Run& run) {
  run.ended = Clock::now();
  run.cpu_at_end = cpu_ms();
  // Self-contained: every frame named and the file written once; served lazily: the front end names the
  // frames, only the lock passes' stacks are named now. A pending signal: no names at all, the file first.
  const bool bake = (a.symbolicate == 1 || (a.symbolicate == -1 && a.save_only)) && !run.pending();
  const passes::Naming naming = run.pending() ? passes::Naming::Raw
                                : bake        ? passes::Naming::Baked
                                              : passes::Naming::Lazy;
  const Clock::time_point t = Clock::now();
  passes::Outcome passed = passes::run(run.profile(), {&*run.symbols, naming, true});
  run.tracks = std::move(passed.tracks);
  run.pass_ms = std::move(passed.ms);
  if (bake) {
    run.frames_named = true;
    run.named = passed.named;
    run.naming_ms = ms_since(t);
    run.profile().meta.presymbolicated = true;
  }
  run.no_debug = std::move(passed.named.no_debug);
}

// The file (Gecko) and the lines saying what was recorded; the heap summary's figures are made beside the
// writer when the frames are named already. The exit status on failure.
std::optional<int> write_profile(const RecordArgs& a, Run& run) {
  const recorder::Options& rec = a.rec;
  const recorder::Stats& st = run.recording->stats;
  // The heap summary reads the named model as the writer does: made on a thread of its own meanwhile (the
  // writer mostly waits for its deflating thread: cc1plus's --heap=full summary took 40-100 ms after it).
  if (rec.heap && run.profile().meta.presymbolicated && !run.pending())
    run.heap_report = std::async(
        std::launch::async, [&p = std::as_const(run.profile())] { return sinks::make_heap_report(p, 5); });
  const Clock::time_point writing = Clock::now();
  if (auto s = gecko::write_gecko_profile(run.profile(), a.output, run.tracks); !s) {
    say(s.error());
    return run.failure();
  }
  if (rec.verbose) {
    std::string line;  // each pass's time, after the figures the line always had
    char buf[64];
    for (const auto& [name, ms] : run.pass_ms) {
      std::snprintf(buf, sizeof buf, "%s %s %.1f ms", line.empty() ? "; passes:" : ",", name, ms);
      line += buf;
    }
    std::fprintf(stderr,
                 "fxprof: after the recording: symbols %.1f ms (%zu binaries, %zu addresses; %zu binaries "
                 "loaded while it ran), file %.1f ms, %.1f ms in all (%.1f ms of CPU)%s\n",
                 run.naming_ms, run.named.binaries, run.named.addresses, run.preloaded, ms_since(writing),
                 ms_since(run.ended), cpu_ms() - run.cpu_at_end, line.c_str());
  }
  std::fprintf(stderr,
               "fxprof: recorded %.2f s, %llu samples, %u threads, %u processes, %llu lost records -> %s\n",
               st.duration_s, static_cast<unsigned long long>(st.samples), st.threads, st.processes,
               static_cast<unsigned long long>(st.lost_records), a.output.c_str());
  if (rec.system_wide) {  // -a: the idle task is no thread; its share of the CPU samples says how busy
    const uint64_t busy = st.samples - st.off_cpu_samples;
    const double all = static_cast<double>(busy + st.idle_samples);
    std::fprintf(stderr, "fxprof: -a: the CPUs were idle %.0f%% of the time (%llu idle samples, %llu busy)\n",
                 all > 0 ? 100.0 * static_cast<double>(st.idle_samples) / all : 0.0,
                 static_cast<unsigned long long>(st.idle_samples), static_cast<unsigned long long>(busy));
    // The kernel's own work, by kind (passes/kernel_time.h): what no process's track would explain.
    const passes::KernelTimeShares k = passes::kernel_time_shares(run.profile());
    auto pct = [&](uint64_t n) {
      return k.samples ? 100.0 * static_cast<double>(n) / static_cast<double>(k.samples) : 0.0;
    };
    std::fprintf(
        stderr,
        "fxprof: -a: of the busy samples, kernel threads %.1f%%, hard interrupts %.1f%%, softirqs %.1f%%\n",
        pct(k.kernel_thread), pct(k.irq), pct(k.softirq));
  }
  if (rec.event)
    std::fprintf(stderr,
                 "fxprof: sampled on %s, one sample per %llu event%s: %llu samples stand for ~%llu %s%s\n",
                 rec.event->name.c_str(), static_cast<unsigned long long>(st.event_period),
                 st.event_period == 1 ? "" : "s", static_cast<unsigned long long>(st.samples),
                 static_cast<unsigned long long>(st.samples * st.event_period), rec.event->name.c_str(),
                 st.lost_records ? " (some were lost: a larger -c samples fewer of them)" : "");
  return std::nullopt;
}

// The heap's figures, the top functions and the exports want names: symbolicates the model, unless it was
// for the file. The exit status when an export fails.
std::optional<int> summary_and_exports(const RecordArgs& a, Run& run) {
  const bool heap = a.rec.heap.has_value();
  if ((a.quiet && a.exports.empty() && !heap) || run.pending()) return std::nullopt;
  if (!run.profile().meta.presymbolicated) run.name_frames();
  if (heap) {
    const sinks::HeapReport r =
        run.heap_report.valid() ? run.heap_report.get() : sinks::make_heap_report(run.profile(), 5);
    std::fputs(sinks::format_heap_summary(r, 5).c_str(), stderr);
  }
  std::fputs(run.recording->stats.heap_incomplete.c_str(), stderr);
  if (!a.quiet) {
    if (std::string line = passes::missing_debug_line(run.no_debug); !line.empty()) say(line);
    std::string top = sinks::top_self_summary(run.profile(), 5);
    if (!top.empty()) std::fprintf(stderr, "fxprof: top self: %s\n", top.c_str());
    std::string locks = passes::lock_wait_summary(run.profile(), 3);
    if (!locks.empty()) std::fprintf(stderr, "fxprof: lock waits: %s\n", locks.c_str());
  }
  for (const std::string& format : a.exports) {
    const sinks::ExportFormat* sink = sinks::find_export_format(format);  // checked by the options
    const std::string path = sinks::output_beside(a.output, std::string(sink->extension));
    const Status s = sink->write(run.profile(), path, {});
    if (!s) {
      say(s.error());
      return run.failure();
    }
    std::fprintf(stderr, "fxprof: wrote %s\n", path.c_str());
  }
  return std::nullopt;
}

// Sent on (share with teammates, push to a fleet) from the model just recorded, its frames named by the
// symbolizer that loaded the binaries while the program ran: nothing is written to a temporary file, read
// back or symbolicated again. The exit status when that fails.
std::optional<int> share_and_push(const RecordArgs& a, Run& run) {
  const bool push = !a.push.pyroscope.empty() || !a.push.parca.empty();
  if ((!a.sharing() && !push) || run.pending() || run.recording->hangup) return std::nullopt;
  run.name_frames();
  int rc = 0;
  if (push) rc = push_profile(run.profile(), a.push);
  if (a.sharing() && rc == 0) rc = share_profile(run.profile(), a.share_options);
  if (rc != 0) return run.recording->exit_status != 0 ? run.recording->exit_status : rc;
  return std::nullopt;
}

// Sinks: the file, the summary lines and exports, the upload. The exit status when one fails.
std::optional<int> write_sinks(RecordArgs& a, Run& run) {
  if (auto exit = write_profile(a, run)) return exit;
  // Every thread shown, the busiest selected.
  a.serve.view = gecko::gecko_view_query(run.profile(), run.tracks);
  run.tracks.clear();
  if (auto exit = summary_and_exports(a, run)) return exit;
  return share_and_push(a, run);
}

// Serve: the file and the symbolizer (with what it loaded for the summary: no library read twice), unless
// the profile was only to be saved or sent, or nobody is there (a signal, a closed terminal). The exit
// status: the program's, or 1 when the server fails.
int serve(RecordArgs& a, Run& run) {
  server::ServeOptions& options = a.serve;
  const int exit_status = run.recording->exit_status;
  const bool serving = !a.save_only && !a.sharing() && !run.pending() && !run.recording->hangup;
  options.libs = passes::known_libs(run.profile());  // no need to read the file back to serve it
  // Binaries deleted while they ran are served through the recorder's descriptors (model::Lib::read_path).
  std::vector<UniqueFd> open_files = std::move(run.recording->open_files);
  const std::unique_ptr<recorder::ChildReaper> reaper = std::move(run.recording->reaper);  // -d: no zombie
  run.recording.reset();  // free the model before serving
  if (!serving) {
    run.preloader.reset();  // its thread uses the symbolizer
    run.symbols.reset();
    return exit_status;
  }
  run.hold->release();  // the server handles Ctrl+C itself
  options.profile_path = a.output;
  options.symbolizer = &*run.symbols;
  if (auto s = server::serve_profile(options); !s) {
    say(s.error());
    return failure(exit_status);
  }
  return exit_status;
}

}  // namespace

// parse -> record -> passes -> sinks -> serve.
int cmd_record(std::span<char*> args) {
  RecordArgs a;
  if (auto exit = parse_record_args(args, a)) return *exit;
  Run run;
  if (auto exit = record(a, run)) return *exit;
  run_passes(a, run);
  if (auto exit = write_sinks(a, run)) return *exit;
  return serve(a, run);
}

}  // namespace fxprof::cli
