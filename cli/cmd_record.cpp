// `fxprof record`: launch or attach, record, write the profile, then serve it (or bake symbols in).
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
#include "heap/heap.h"
#include "model/critical_path.h"
#include "passes/kernel_time.h"
#include "passes/locks.h"
#include "passes/passes.h"
#include "passes/preload.h"
#include "recorder/heap_uprobes.h"
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

// --heap: the heap library's reader, and uprobes on an allocator linked into the program.
struct HeapRecording {
  std::unique_ptr<heap::HeapSource> source;
  heap::OwnAllocator own;
  std::unique_ptr<recorder::HeapUprobes> uprobes;
  std::string uprobes_error;
};

// The heap library goes into the environment of the program we launch only (heap/heap.h). False (said) when
// its reader cannot start.
bool start_heap(const RecordArgs& a, HeapRecording& heap) {
  const recorder::Options& rec = a.rec;
  if (!a.heap) return true;
  heap::Options options = *a.heap;
  // An allocator linked into the program makes calls the heap library never sees: as root, uprobes on its
  // functions record them instead (recorder/heap_uprobes.h), and the library leaves out what is allocated
  // inside them (a Rust allocator that forwards to malloc); otherwise a line says so, by name.
  if (!rec.command.empty()) {
    const std::string exe = recorder::command_path(rec.command[0]);
    heap.own = heap::own_allocator(exe);
    if (!heap.own.static_executable && !heap.own.functions.empty()) {
      std::vector<std::string> functions = heap.own.functions;
      functions.insert(functions.end(), heap.own.frees.begin(), heap.own.frees.end());
      auto u = recorder::HeapUprobes::start(exe, functions);
      if (u) {
        heap.uprobes = std::move(*u);
        options.probed_exe = exe;
        options.probed_code = heap.own.code;
      } else {
        heap.uprobes_error = u.error();
      }
    }
  }
  // Its reader thread starts with the recording's signals blocked, as record() will block them in this one.
  auto h = [&] {
    SignalsBlocked blocked;
    return heap::HeapSource::start(options);
  }();
  if (!h) {
    say(h.error());
    return false;
  }
  heap.source = std::move(*h);
  return true;
}

// Adds the heap's events to the recording and says what it could not see; returns the lost-chunks line, said
// later with the heap's summary.
std::string finish_heap(HeapRecording& heap, Result<recorder::Recording>& recording,
                        const recorder::Options& rec) {
  std::string heap_lost;
  if (!heap.source) return heap_lost;
  if (recording) {
    const std::string& program = rec.command.at(0);
    std::string uprobes_line;
    if (heap.uprobes) {
      // Only the processes recorded (the probes are on the file: anything else running it is left out).
      std::vector<heap::ExternalCall> calls = heap.uprobes->finish();
      std::erase_if(calls, [&](const heap::ExternalCall& c) {
        for (const model::Process& p : recording->profile.processes)
          if (p.pid == c.pid) return false;
        return true;
      });
      heap.source->add_external(calls);
      uprobes_line =
          heap::uprobes_line(program, heap.uprobes->attached(), calls.size(), heap.uprobes->dropped());
    }
    heap::Summary h = heap.source->finish(recording->profile);
    const std::string line = !heap.uprobes   ? heap::own_allocator_line(program, heap.own, heap.uprobes_error)
                             : heap.own.rust ? heap::rust_allocator_line(program, heap.uprobes->attached())
                                             : "";
    if (!line.empty()) {
      const recorder::QualityProblem q{"Allocator --heap cannot see: " + program, 1, line};
      recorder::report_quality(recording->profile, {&q, 1});
    }
    if (!uprobes_line.empty()) std::fprintf(stderr, "fxprof: %s\n", uprobes_line.c_str());
    if (h.lost_chunks > 0)
      heap_lost = "fxprof: heap: " + std::to_string(h.lost_chunks) +
                  " event chunks lost (the program closed the pipe)\n";
    // Streams cut short: said with the data quality, and again under the figures they leave incomplete.
    std::vector<recorder::QualityProblem> cuts;
    for (const heap::StreamCut& c : h.cuts) {
      std::string name = program;  // the process's own name when perf saw it (a child)
      for (const model::Process& p : recording->profile.processes)
        if (p.pid == c.pid && !p.name.empty()) name = p.name;
      cuts.push_back({"Heap stream cut: " + name + " (pid " + std::to_string(c.pid) + ")", 1,
                      heap::stream_cut_line(name, c, recording->profile.meta.start_monotonic_ns), c.pid,
                      c.time_ns});
    }
    if (!cuts.empty()) recorder::report_quality(recording->profile, cuts);
    if (!cuts.empty())
      heap_lost += "fxprof: heap: incomplete: the stream of " + std::to_string(cuts.size()) +
                   " process(es) was cut (above), their later allocations are not counted\n";
  }
  heap.source.reset();
  return heap_lost;
}

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

// Names the model's frames (only the addresses samples use) and what needs the names (the Lock wait
// markers' "Held by": passes::name_frames), once, for whichever of the file, the summary and the upload asks
// first; timed for -v.
struct FrameNamer {
  model::Profile& profile;
  symbolizer::Symbolizer& symbols;
  passes::SymbolicateStats named;
  std::vector<std::string> no_debug;  // binaries without their debug file: one line in the summary
  double ms = 0;
  bool done = false;
  void operator()() {
    if (done) return;
    done = true;
    const Clock::time_point t = Clock::now();
    named = passes::name_frames(profile, symbols);
    no_debug.insert(no_debug.end(), named.no_debug.begin(), named.no_debug.end());
    ms = ms_since(t);
  }
};

// Runs the passes (passes/passes.h: JIT names over every stack the recorder and the heap made, symbols when
// baked, lock holders, critical-path tracks), writes the file and says what was recorded; `heap_report`
// gets the heap summary's figures when they were made beside the writer. The exit status on failure.
std::optional<int> name_and_write(const RecordArgs& a, recorder::Recording& recording,
                                  symbolizer::Symbolizer& symbols, const SignalsBlocked& hold,
                                  FrameNamer& name_frames, size_t preloaded,
                                  std::future<sinks::HeapReport>& heap_report,
                                  std::vector<model::SyntheticThread>& tracks) {
  const recorder::Options& rec = a.rec;
  const auto& st = recording.stats;
  const Clock::time_point ended = Clock::now();
  const double cpu_at_end = cpu_ms();
  // Self-contained: every frame named and the file written once; served lazily: the front end names the
  // frames, only the lock passes' stacks are named now. A pending signal: no names at all, the file first.
  const bool bake = (a.symbolicate == 1 || (a.symbolicate == -1 && a.save_only)) && !hold.pending();
  const passes::Naming naming = hold.pending() ? passes::Naming::Raw
                                : bake         ? passes::Naming::Baked
                                               : passes::Naming::Lazy;
  const Clock::time_point t = Clock::now();
  passes::Outcome passed = passes::run(recording.profile, {&symbols, naming, true});
  tracks = std::move(passed.tracks);
  if (bake) {
    name_frames.done = true;
    name_frames.named = passed.named;
    name_frames.ms = ms_since(t);
    recording.profile.meta.presymbolicated = true;
  }
  name_frames.no_debug = std::move(passed.named.no_debug);
  // The heap summary reads the named model as the writer does: made on a thread of its own meanwhile (the
  // writer mostly waits for its deflating thread: cc1plus's --heap=full summary took 40-100 ms after it).
  if (a.heap && recording.profile.meta.presymbolicated && !hold.pending())
    heap_report = std::async(std::launch::async, [&p = std::as_const(recording.profile)] {
      return sinks::make_heap_report(p, 5);
    });
  const Clock::time_point writing = Clock::now();
  if (auto s = gecko::write_gecko_profile(recording.profile, a.output, tracks); !s) {
    say(s.error());
    return failure(recording.exit_status);
  }
  if (rec.verbose) {
    std::string line;  // each pass's time, after the figures the line always had
    char buf[64];
    for (const auto& [name, ms] : passed.ms) {
      std::snprintf(buf, sizeof buf, "%s %s %.1f ms", line.empty() ? "; passes:" : ",", name, ms);
      line += buf;
    }
    std::fprintf(stderr,
                 "fxprof: after the recording: symbols %.1f ms (%zu binaries, %zu addresses; %zu binaries "
                 "loaded while it ran), file %.1f ms, %.1f ms in all (%.1f ms of CPU)%s\n",
                 name_frames.ms, name_frames.named.binaries, name_frames.named.addresses, preloaded,
                 ms_since(writing), ms_since(ended), cpu_ms() - cpu_at_end, line.c_str());
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
    const passes::KernelTimeShares k = passes::kernel_time_shares(recording.profile);
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
std::optional<int> summary_and_exports(const RecordArgs& a, recorder::Recording& recording,
                                       const SignalsBlocked& hold, FrameNamer& name_frames,
                                       const std::string& heap_lost,
                                       std::future<sinks::HeapReport>& heap_report) {
  const bool heap = a.heap.has_value();
  if ((a.quiet && a.exports.empty() && !heap) || hold.pending()) return std::nullopt;
  if (!recording.profile.meta.presymbolicated) name_frames();
  if (heap) {
    const sinks::HeapReport r =
        heap_report.valid() ? heap_report.get() : sinks::make_heap_report(recording.profile, 5);
    std::fputs(sinks::format_heap_summary(r, 5).c_str(), stderr);
  }
  std::fputs(heap_lost.c_str(), stderr);
  if (!a.quiet) {
    if (std::string line = passes::missing_debug_line(name_frames.no_debug); !line.empty()) say(line);
    std::string top = sinks::top_self_summary(recording.profile, 5);
    if (!top.empty()) std::fprintf(stderr, "fxprof: top self: %s\n", top.c_str());
    std::string locks = passes::lock_wait_summary(recording.profile, 3);
    if (!locks.empty()) std::fprintf(stderr, "fxprof: lock waits: %s\n", locks.c_str());
  }
  for (const std::string& format : a.exports) {
    const sinks::ExportFormat* sink = sinks::find_export_format(format);  // checked by the options
    const std::string path = sinks::output_beside(a.output, std::string(sink->extension));
    const Status s = sink->write(recording.profile, path, {});
    if (!s) {
      say(s.error());
      return failure(recording.exit_status);
    }
    std::fprintf(stderr, "fxprof: wrote %s\n", path.c_str());
  }
  return std::nullopt;
}

// Sent on (share with teammates, push to a fleet) from the model just recorded, its frames named by the
// symbolizer that loaded the binaries while the program ran: nothing is written to a temporary file, read
// back or symbolicated again. The exit status when that fails.
std::optional<int> share_and_push(const RecordArgs& a, recorder::Recording& recording,
                                  FrameNamer& name_frames) {
  const bool push = !a.push.pyroscope.empty() || !a.push.parca.empty();
  if (!a.sharing() && !push) return std::nullopt;
  name_frames();
  int rc = 0;
  if (push) rc = push_profile(recording.profile, a.push);
  if (a.sharing() && rc == 0) rc = share_profile(recording.profile, a.share_options);
  if (rc != 0) return recording.exit_status != 0 ? recording.exit_status : rc;
  return std::nullopt;
}

}  // namespace

// The passes of a recording: start the heap source, record, finish the heap, refuse an empty recording, name
// and write, summary and exports, share/push, serve.
int cmd_record(std::span<char*> args) {
  RecordArgs a;
  if (auto exit = parse_record_args(args, a)) return *exit;
  recorder::Options& rec = a.rec;
  server::ServeOptions& serve = a.serve;
  const bool save_only = a.save_only, sharing = a.sharing();
  const int symbolicate = a.symbolicate;

  HeapRecording heap;
  if (!start_heap(a, heap)) return 1;
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
  // One symbolizer for the file, the summary, the exports and the server. Unless the frames stay raw, it
  // loads the binaries' symbols while the program runs (passes/preload.h): after the exit only lookups
  // remain.
  std::optional<symbolizer::Symbolizer> symbols(std::in_place, serve.symbols);
  std::optional<passes::SymbolPreloader> preloader;
  if (symbolicate != 0) {
    preloader.emplace(*symbols);
    rec.on_binary_mapped = [&](const model::Lib& lib) { preloader->mapped(lib); };
  }
  // The program launched writes its markers where the recorder reads them (recorder/markers_env.h).
  std::optional<recorder::MarkerEnvironment> markers;
  if (!rec.command.empty()) {
    markers.emplace();
    for (const std::string& note : markers->notes()) say(note);
  }
  auto recording = recorder::record(rec);
  markers.reset();
  const size_t preloaded = preloader ? preloader->stop() : 0;
  const std::string heap_lost = finish_heap(heap, recording, rec);
  finish_usdt(usdt, recording);
  if (!recording) {
    say(recording.error());
    return recording.exit_code();
  }
  const int exit_status = recording->exit_status;
  const bool recording_hangup = recording->hangup;
  if (auto exit = refuse_empty(rec, *recording)) return *exit;

  // A Ctrl-C while the profile is written must not leave a temporary file behind: hold SIGINT/SIGTERM until
  // the file is complete, then take a pending one as "do not serve".
  SignalsBlocked hold(SignalsBlocked::Pending::Drop);
  FrameNamer name_frames{recording->profile, *symbols, {}, {}};
  std::future<sinks::HeapReport> heap_report;
  std::vector<model::SyntheticThread> tracks;
  if (auto exit = name_and_write(a, *recording, *symbols, hold, name_frames, preloaded, heap_report, tracks))
    return *exit;
  serve.view =
      gecko::gecko_view_query(recording->profile, tracks);  // every thread shown, the busiest selected
  tracks.clear();
  if (auto exit = summary_and_exports(a, *recording, hold, name_frames, heap_lost, heap_report)) return *exit;
  if (!hold.pending() && !recording_hangup)
    if (auto exit = share_and_push(a, *recording, name_frames)) return *exit;
  serve.libs = passes::known_libs(recording->profile);  // no need to read the file back to serve it
  // Binaries deleted while they ran are served through the recorder's descriptors (model::Lib::read_path).
  std::vector<UniqueFd> open_files = std::move(recording->open_files);
  const std::unique_ptr<recorder::ChildReaper> reaper = std::move(recording->reaper);  // -d: no zombie
  recording = Error{};  // free the model before serving
  // The symbolizer goes on to the server with what it loaded for the summary (no library read twice); it is
  // freed now only when nothing is served.
  const bool serving = !save_only && !sharing && !hold.pending() && !recording_hangup;
  if (!serving) {
    preloader.reset();  // its thread uses the symbolizer
    symbols.reset();
  }
  // After a hangup (closed terminal, dropped SSH) nobody is there to open the URL: the profile is the result.
  if (serving && !hold.pending()) {
    hold.release();  // the server handles Ctrl+C itself
    serve.profile_path = a.output;
    serve.symbolizer = &*symbols;
    if (auto s = server::serve_profile(serve); !s) {
      say(s.error());
      return failure(exit_status);
    }
  }
  return exit_status;
}

}  // namespace fxprof::cli
