// `fxprof record`: launch or attach, record, write the profile, then serve it (or bake symbols in).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "base/fd.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/publish.h"
#include "counters/events.h"
#include "exporter/flamegraph_svg.h"
#include "exporter/folded.h"
#include "exporter/gecko.h"
#include "exporter/heap_report.h"
#include "exporter/output.h"
#include "exporter/pprof.h"
#include "exporter/report.h"
#include "heap/heap.h"
#include "pipeline/symbolicate.h"
#include "recorder/offcpu.h"
#include "recorder/quality.h"
#include "recorder/recorder.h"
#include "server/server.h"

namespace fxprof::cli {
namespace {

constexpr const char* kHelp =
    "Usage: fxprof record [OPTIONS] [--] COMMAND [ARGS...]\n"
    "       fxprof record [OPTIONS] -p PID[,PID...]\n"
    "\n"
    "Samples every thread of every process COMMAND starts (or of the running processes PID), writes a "
    "Firefox\n"
    "Profiler profile, then serves it on 127.0.0.1 and opens the Firefox Profiler on it. Options must come\n"
    "before COMMAND; what follows COMMAND belongs to it. fxprof exits with the program's exit status.\n"
    "\n"
    "Recording:\n"
    "  -F, --freq HZ            samples per second per thread (default 1000; lowered to the kernel's\n"
    "                           perf_event_max_sample_rate with a notice)\n"
    "  -e, --event EVENT        sample on EVENT instead of the clock, with the same stacks: software\n"
    "                           (page-faults, minor-faults, major-faults, context-switches,\n"
    "                           cpu-migrations), hardware where a PMU exists (cycles, instructions,\n"
    "                           cache-misses, branch-misses...) or a tracepoint CATEGORY:NAME\n"
    "                           (syscalls:sys_enter_write). One sample per period events, so each weighs\n"
    "                           the same; on-CPU only (no off-CPU samples); one event per recording\n"
    "  -c, --period N           with -e: one sample every N events (default 1 for software events and\n"
    "                           tracepoints; cycles and instructions 1000003, cache-misses and\n"
    "                           branch-misses 1009)\n"
    "  --call-graph MODE        dwarf (default: copy the user stack and unwind it with the binaries' CFI)\n"
    "                           or fp (frame pointers only: cheaper, for programs built with them)\n"
    "  --stack-size BYTES       user stack copied per sample in dwarf mode (default 32768, at most 65528;\n"
    "                           8192 with -e)\n"
    "  --buffer-size BYTES      ring buffer per CPU (default: room for ~32 samples, 2 MiB in dwarf mode as\n"
    "                           root; an ordinary user gets at most kernel.perf_event_mlock_kb). Larger\n"
    "                           loses fewer records at high rates; rounded down to a power-of-two pages\n"
    "  -p, --pid PID[,PID...]   attach to running processes (and what they start) until Ctrl+C or "
    "--duration\n"
    "  -d, --duration SECONDS   stop recording after SECONDS (the program keeps running)\n"
    "  --heap[=MODE]            also record heap allocations and frees (launch mode only): sampled\n"
    "                           (default: Poisson sampling by bytes, unbiased estimates) or full (every\n"
    "                           allocation and free: exact leaks and peak)\n"
    "  --heap-rate BYTES        sampled mode: on average one sample per BYTES allocated (default 524288)\n"
    "  --cpu-only               on-CPU samples only. By default the profile is wall-clock: time a thread\n"
    "                           spends blocked or preempted is sampled too, at the same rate, with the\n"
    "                           stack it waited in, under a [blocked: futex|I/O|sleep|page fault] or\n"
    "                           [preempted] leaf in the Idle category and no CPU use, plus a marker per\n"
    "                           wait (\"Lock wait\" with the lock's address for mutexes) and a\n"
    "                           \"Threads waiting\" track per process with lock waits. As root an eBPF\n"
    "                           program also names the thread that woke each wait, and for a lock the\n"
    "                           holder: a \"Wakeup\" marker on the thread that unlocked, with its stack,\n"
    "                           and the function that held the lock (\"Held by\"). In the Firefox\n"
    "                           Profiler the CPU graph shows CPU use only and the call tree wall-clock\n"
    "                           time; for CPU time alone, right-click a [blocked...] node and \"Drop\n"
    "                           samples with this function\". Stacks of waits need root or\n"
    "                           kernel.perf_event_paranoid <= 1; otherwise waits are markers without\n"
    "                           stacks, and fxprof says so\n"
    "  --off-cpu-threshold MS   a marker for every wait of at least MS milliseconds (default 1; 0: all)\n"
    "  --off-cpu-stack-size BYTES\n"
    "                           user stack copied at each context switch in dwarf mode (default 8192,\n"
    "                           as perf; at most 65528). The kernel copies it in the program's time at\n"
    "                           every switch: raise it if fxprof says off-CPU stacks are incomplete\n"
    "  -v, --verbose            print what the recorder chose (event, buffer sizes, timings) and\n"
    "                           how long each pass took (plan, start, read, drain, finish)\n"
    "\n"
    "Output:\n"
    "  -o, --output FILE        profile file (default profile.json.gz; gzip when it ends in .gz); a\n"
    "                           regular file is replaced whole, a device, FIFO or \"-\" is written as a\n"
    "                           stream (with -s), a symlink is followed, a directory is refused\n"
    "  -s, --save-only          write the profile and exit, without serving it; the profile is made\n"
    "                           self-contained (symbols baked in) unless --no-symbolicate\n"
    "  --symbolicate            bake symbols into the profile (names, inlined frames) so that it opens\n"
    "                           without fxprof's server and can be shared\n"
    "  --no-symbolicate         keep raw addresses (symbolicated lazily by `fxprof load`)\n"
    "  --symbol-dir DIR         also look for symbol files in DIR (repeatable; also for unwinding)\n"
    "  --export FORMAT          also write the profile as folded, pprof or svg beside it (profile.folded,\n"
    "                           profile.pb.gz, profile.svg; repeatable)\n"
    "  -q, --quiet              no top-functions line after recording\n"
    "\n"
    "Sharing (after the profile is written; see `fxprof share --help` and `fxprof push --help`):\n"
    "  --share                  upload the self-contained profile to the Firefox Profiler's public store\n"
    "                           and print its link instead of serving (asks first; --yes on scripts)\n"
    "  --share-to URL           PUT the self-contained profile to URL (your own store) and print the\n"
    "                           from-url link instead of serving\n"
    "  --yes                    with --share: upload without asking\n"
    "  --upload-url ORIGIN      with --share: the store (default https://api.profiler.firefox.com)\n"
    "  --push KIND=URL          also send the profile as pprof to pyroscope=URL or parca=ADDR (repeatable)\n"
    "  --push-label NAME=VALUE  a label of the pushed series (repeatable)\n"
    "\n"
    "Serving (unless --save-only, --share or --share-to):\n"
    "  -n, --no-open            do not open a browser; print the Firefox Profiler URL\n"
    "  --address ADDR           address to serve on (default 127.0.0.1)\n"
    "  -P, --port PORT          port to serve on (default 3000 or the next free one)\n"
    "  -h, --help               this help\n";

// Blocks SIGINT, SIGTERM and SIGHUP while alive; release() drops any pending one and restores the mask.
class SignalHold {
 public:
  SignalHold() : set_(recorder::recording_signals()) { sigprocmask(SIG_BLOCK, &set_, &previous_); }
  ~SignalHold() { release(); }
  SignalHold(const SignalHold&) = delete;
  SignalHold& operator=(const SignalHold&) = delete;
  bool interrupted() const {
    sigset_t pending;
    sigpending(&pending);
    for (int sig = 1; sig < NSIG; ++sig)
      if (sigismember(&set_, sig) == 1 && sigismember(&pending, sig) == 1) return true;
    return false;
  }
  void release() {
    if (released_) return;
    released_ = true;
    timespec zero{};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    sigprocmask(SIG_SETMASK, &previous_, nullptr);
  }

 private:
  sigset_t set_, previous_;
  bool released_ = false;
};

constexpr std::string_view kCommand = "record";

}  // namespace

int cmd_record(std::span<char*> args) {
  recorder::Options rec;
  rec.off_cpu = true;  // wall-clock by default; --cpu-only for on-CPU samples alone
  server::ServeOptions serve;
  std::string output = "profile.json.gz";
  bool save_only = false;
  int symbolicate = -1;  // -1: default (yes with --save-only, no when serving)
  bool share = false;
  ShareOptions share_options;
  PushTargets push;
  std::vector<std::string> exports;
  bool quiet = false;
  std::optional<heap::Options> heap_opt;
  double heap_rate = 512 * 1024;
  bool freq_given = false, stack_given = false;

  ArgParser p(args);
  while (p.at_option()) {
    if (p.flag("-h", "--help")) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (auto v = p.option("-o", "--output")) {
      output = *v;
    } else if (auto v = p.option("-F", "--freq")) {
      auto n = parse_number(*v);
      if (!n || *n <= 0 || *n > 1e6)
        return usage_error(kCommand, "--freq needs a positive number of samples per second");
      rec.frequency_hz = *n;
      freq_given = true;
    } else if (auto v = p.option("-e", "--event")) {
      if (v->find(',') != std::string::npos)
        return usage_error(kCommand,
                           "one event per recording: the stacks of two events would add up in one call tree "
                           "(record once per event, or count several with `fxprof stat -e " + *v + "`)");
      auto e = counters::find_event(*v);
      if (!e) {
        std::fprintf(stderr, "fxprof record: %s\n", e.error().c_str());
        return 2;
      }
      rec.event = std::move(*e);
    } else if (auto v = p.option("-c", "--period")) {
      auto n = parse_number(*v);
      if (!n || *n < 1 || *n > 1e15) return usage_error(kCommand, "--period needs a positive number of events");
      rec.event_period = static_cast<uint64_t>(*n);
    } else if (auto v = p.option("", "--call-graph")) {
      if (*v == "dwarf")
        rec.call_graph = recorder::CallGraph::Dwarf;
      else if (*v == "fp")
        rec.call_graph = recorder::CallGraph::FramePointer;
      else
        return usage_error(kCommand, "--call-graph must be dwarf or fp");
    } else if (auto v = p.option("", "--stack-size")) {
      auto n = parse_number(*v);
      if (!n || *n < 512 || *n > 65528)
        return usage_error(kCommand, "--stack-size must be between 512 and 65528 bytes");
      rec.stack_size = static_cast<uint32_t>(*n) & ~7u;  // the kernel wants a multiple of 8
      stack_given = true;
    } else if (auto v = p.option("", "--buffer-size")) {
      auto n = parse_number(*v);
      if (!n || *n < 4096 || *n > (uint64_t{1} << 30))
        return usage_error(kCommand, "--buffer-size must be between 4096 bytes and 1 GiB");
      rec.buffer_bytes = static_cast<uint64_t>(*n);
    } else if (auto v = p.option("", "--off-cpu-stack-size")) {
      auto n = parse_number(*v);
      if (!n || *n < 512 || *n > 65528)
        return usage_error(kCommand, "--off-cpu-stack-size must be between 512 and 65528 bytes");
      rec.off_cpu_stack_size = static_cast<uint32_t>(*n) & ~7u;
    } else if (auto v = p.option("-p", "--pid")) {
      size_t start = 0;
      while (start <= v->size()) {
        size_t comma = v->find(',', start);
        std::string one = v->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        auto n = parse_number(one);
        if (!n || *n < 1 || *n != static_cast<int>(*n))
          return usage_error(kCommand, "--pid needs process ids, like 123,456");
        rec.pids.push_back(static_cast<int>(*n));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (auto v = p.option("-d", "--duration")) {
      auto n = parse_number(*v);
      if (!n || *n <= 0) return usage_error(kCommand, "--duration needs a positive number of seconds");
      rec.duration_s = *n;
    } else if (p.flag("", "--heap")) {
      heap_opt = heap::Options{};
    } else if (auto v = p.option("", "--heap")) {
      if (*v != "sampled" && *v != "full") return usage_error(kCommand, "--heap must be sampled or full");
      heap_opt = heap::Options{};
      heap_opt->mode = *v == "full" ? heap::Mode::Full : heap::Mode::Sampled;
    } else if (auto v = p.option("", "--heap-rate")) {
      auto n = parse_number(*v);
      if (!n || *n < 1) return usage_error(kCommand, "--heap-rate needs a positive number of bytes");
      heap_rate = *n;
    } else if (p.flag("", "--cpu-only")) {
      rec.off_cpu = false;
    } else if (auto v = p.option("", "--off-cpu-threshold")) {
      auto n = parse_number(*v);
      if (!n || *n < 0)
        return usage_error(kCommand, "--off-cpu-threshold needs a number of milliseconds (0 or more)");
      rec.off_cpu_threshold_ms = *n;
    } else if (p.flag("-v", "--verbose")) {
      rec.verbose = true;
    } else if (p.flag("-s", "--save-only")) {
      save_only = true;
    } else if (p.flag("", "--symbolicate")) {
      symbolicate = 1;
    } else if (p.flag("", "--no-symbolicate")) {
      symbolicate = 0;
    } else if (auto v = p.option("", "--symbol-dir")) {
      serve.symbols.symbol_dirs.push_back(*v);
      rec.symbol_dirs.push_back(*v);  // the unwinder looks for .debug_frame there too
    } else if (auto v = p.option("", "--export")) {
      if (*v != "folded" && *v != "pprof" && *v != "svg")
        return usage_error(kCommand, "--export must be folded, pprof or svg");
      exports.push_back(*v);
    } else if (p.flag("", "--share")) {
      share = true;
    } else if (auto v = p.option("", "--share-to")) {
      share_options.share_to = *v;
    } else if (p.flag("", "--yes")) {
      share_options.yes = true;
    } else if (auto v = p.option("", "--upload-url")) {
      share_options.upload_origin = *v;
    } else if (auto v = p.option("", "--push")) {
      if (v->rfind("pyroscope=", 0) == 0 && v->size() > 10)
        push.pyroscope = v->substr(10);
      else if (v->rfind("parca=", 0) == 0 && v->size() > 6)
        push.parca = v->substr(6);
      else
        return usage_error(kCommand, "--push needs pyroscope=URL or parca=ADDR");
    } else if (auto v = p.option("", "--push-label")) {
      if (auto e = add_label(*v, push.options.labels); !e.empty()) return usage_error(kCommand, e);
    } else if (p.flag("-q", "--quiet")) {
      quiet = true;
    } else if (p.flag("-n", "--no-open")) {
      serve.open_browser = false;
    } else if (auto v = p.option("", "--address")) {
      serve.address = *v;
    } else if (auto v = p.option("-P", "--port")) {
      auto n = parse_number(*v);
      if (!n || *n < 1 || *n > 65535) return usage_error(kCommand, "--port needs a port number");
      serve.port = static_cast<int>(*n);
      serve.port_exact = true;
    } else if (!p.error().empty()) {
      return usage_error(kCommand, p.error());
    } else {
      return usage_error(kCommand, "unknown option '" + std::string(p.peek()) + "'");
    }
  }
  if (!p.error().empty()) return usage_error(kCommand, p.error());
  p.take_separator();
  rec.command = p.rest();
  if (rec.command.empty() && rec.pids.empty())
    return usage_error(kCommand, "nothing to record: give a command or -p PID");
  if (!rec.command.empty() && !rec.pids.empty())
    return usage_error(kCommand, "give either a command or -p PID, not both");

  if (share && !share_options.share_to.empty())
    return usage_error(kCommand, "give --share or --share-to, not both");
  if (share_options.yes && !share) return usage_error(kCommand, "--yes goes with --share");
  const bool sharing = share || !share_options.share_to.empty();
  if (rec.event_period && !rec.event) return usage_error(kCommand, "--period applies to -e EVENT");
  if (rec.event && freq_given)
    return usage_error(kCommand, "-F sets the clock's rate; with -e the samples follow the event: use -c PERIOD");
  if (rec.event) rec.off_cpu = false;  // event samples only: wall-clock samples would mix with them
  // Events come in bursts (a fault or a write per microsecond): 8 KiB stack copies, as perf's, keep 4x more
  // of them in the buffer than 32 KiB ones while the reader unwinds.
  if (rec.event && !stack_given) rec.stack_size = 8192;

  if (heap_opt && !rec.pids.empty())
    return usage_error(kCommand,
                       "--heap records programs fxprof starts; it cannot attach to a running process (-p)");

  // An output we cannot write (a directory, a read-only folder) is found now, not after the program ran.
  auto output_kind = AtomicFile::check(output);
  if (!output_kind) {
    std::fprintf(stderr, "fxprof: %s\n", output_kind.error().c_str());
    return 1;
  }
  // The server reads the profile back from its file: a device or pipe cannot be served.
  if (*output_kind == OutputKind::kStream && !save_only)
    return usage_error(kCommand, output + " is not a regular file: add --save-only to write the profile to it");

  // The heap library goes into the environment of the program we launch only (heap/heap.h).
  std::unique_ptr<heap::HeapSource> heap_source;
  if (heap_opt) {
    heap_opt->rate_bytes = heap_rate;
    // Its reader thread starts with the recording's signals blocked, as record() will block them in this one.
    auto h = [&] {
      recorder::RecordingSignalsBlocked blocked;
      return heap::HeapSource::start(*heap_opt);
    }();
    if (!h) {
      std::fprintf(stderr, "fxprof: %s\n", h.error().c_str());
      return 1;
    }
    heap_source = std::move(*h);
  }
  auto recording = recorder::record(rec);
  std::string heap_lost;
  if (heap_source) {
    if (recording) {
      heap::Summary h = heap_source->finish(recording->profile);
      // An allocator linked into the program makes calls the heap library never sees: say so, by name.
      const std::string& program = rec.command.at(0);
      const std::string line =
          heap::own_allocator_line(program, heap::own_allocator(recorder::command_path(program)));
      if (!line.empty()) {
        const recorder::QualityProblem q{"Allocator --heap cannot see: " + program, 1, line};
        recorder::report_quality(recording->profile, {&q, 1});
      }
      if (h.lost_chunks > 0)
        heap_lost = "fxprof: heap: " + std::to_string(h.lost_chunks) +
                    " event chunks lost (the program closed the pipe)\n";
    }
    heap_source.reset();
  }
  if (!recording) {
    std::fprintf(stderr, "fxprof: %s\n", recording.error().c_str());
    return recording.exit_code();
  }
  const int exit_status = recording->exit_status;
  const bool recording_hangup = recording->hangup;
  const auto& st = recording->stats;
  // Nothing sampled (and no heap data): an empty profile would look like a recording that worked. Say why
  // instead and fail. After a hangup nobody reads the message: the profile (processes, threads) is written.
  bool allocations = false;
  for (const model::Process& proc : recording->profile.processes)
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
  if (counted == 0 && !allocations && !recording_hangup) {
    std::fprintf(stderr, "fxprof: %s\n", recorder::no_samples_message(rec, st).c_str());
    return exit_status != 0 ? exit_status : 1;
  }

  // A Ctrl-C while the profile is written must not leave a temporary file behind: hold SIGINT/SIGTERM until
  // the file is complete, then take a pending one as "do not serve".
  SignalHold hold;
  // Names the model's frames (only the addresses samples use), then what needs the names: the Lock wait
  // markers' "Held by". One symbolizer for the file, the summary, the exports and the server.
  std::optional<symbolizer::Symbolizer> symbols(std::in_place, serve.symbols);
  auto name_frames = [&] {
    pipeline::symbolicate(recording->profile, *symbols);
    recorder::add_lock_holders(recording->profile);
  };
  // Self-contained: symbolicate the model and write the file once.
  if ((symbolicate == 1 || (symbolicate == -1 && save_only)) && !hold.interrupted()) {
    name_frames();
    recording->profile.meta.presymbolicated = true;
  } else if (!hold.interrupted()) {
    // Served lazily: the front end names the frames, but "Held by" is a marker field, written now; only
    // the Wakeup stacks are named for it, the file keeps raw addresses.
    recorder::add_lock_holders_unsymbolicated(
        recording->profile, [&](model::Profile& wakes) { pipeline::symbolicate(wakes, *symbols); });
  }
  if (auto s = exporter::write_gecko_profile(recording->profile, output); !s) {
    std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
    return exit_status != 0 ? exit_status : 1;
  }
  std::fprintf(stderr,
               "fxprof: recorded %.2f s, %llu samples, %u threads, %u processes, %llu lost records -> %s\n",
               st.duration_s, static_cast<unsigned long long>(st.samples), st.threads, st.processes,
               static_cast<unsigned long long>(st.lost_records), output.c_str());
  if (rec.event)
    std::fprintf(stderr, "fxprof: sampled on %s, one sample per %llu event%s: %llu samples stand for ~%llu %s%s\n",
                 rec.event->name.c_str(), static_cast<unsigned long long>(st.event_period),
                 st.event_period == 1 ? "" : "s", static_cast<unsigned long long>(st.samples),
                 static_cast<unsigned long long>(st.samples * st.event_period), rec.event->name.c_str(),
                 st.lost_records ? " (some were lost: a larger -c samples fewer of them)" : "");
  // The heap's figures and the top functions and the exports want names: symbolicate the model, unless it
  // was for the file.
  const bool heap = heap_opt.has_value();
  if ((!quiet || !exports.empty() || heap) && !hold.interrupted()) {
    if (!recording->profile.meta.presymbolicated) name_frames();
    if (heap)
      std::fputs(exporter::format_heap_summary(exporter::make_heap_report(recording->profile, 5), 5).c_str(),
                 stderr);
    std::fputs(heap_lost.c_str(), stderr);
    if (!quiet) {
      std::string top = exporter::top_self_summary(recording->profile, 5);
      if (!top.empty()) std::fprintf(stderr, "fxprof: top self: %s\n", top.c_str());
      std::string locks = recorder::lock_wait_summary(recording->profile, 3);
      if (!locks.empty()) std::fprintf(stderr, "fxprof: lock waits: %s\n", locks.c_str());
    }
    for (const std::string& format : exports) {
      Status s;
      std::string path;
      if (format == "folded") {
        path = exporter::output_beside(output, ".folded");
        s = exporter::write_folded(recording->profile, path, {});
      } else if (format == "pprof") {
        path = exporter::output_beside(output, ".pb.gz");
        s = exporter::write_pprof(recording->profile, path);
      } else {
        path = exporter::output_beside(output, ".svg");
        s = exporter::write_flamegraph_svg(recording->profile, path, {});
      }
      if (!s) {
        std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
        return exit_status != 0 ? exit_status : 1;
      }
      std::fprintf(stderr, "fxprof: wrote %s\n", path.c_str());
    }
  }
  serve.libs = pipeline::known_libs(recording->profile);        // no need to read the file back to serve it
  serve.view = exporter::gecko_view_query(recording->profile);  // every thread shown, the busiest selected
  // Binaries deleted while they ran are served through the recorder's descriptors (model::Lib::read_path).
  std::vector<UniqueFd> open_files = std::move(recording->open_files);
  recording = Error{};  // free the model before serving
  // The symbolizer goes on to the server with what it loaded for the summary (no library read twice); it is
  // freed now only when nothing is served.
  const bool serving = !save_only && !sharing && !hold.interrupted() && !recording_hangup;
  if (!serving) symbols.reset();

  // Sent on (issue: share with teammates, push to a fleet) from the written file, symbols baked on the way.
  if (!hold.interrupted() && !recording_hangup &&
      (sharing || !push.pyroscope.empty() || !push.parca.empty())) {
    InputOptions input;
    input.symbols = serve.symbols;
    int rc = 0;
    if (!push.pyroscope.empty() || !push.parca.empty()) rc = push_profile(output, input, push);
    if (sharing && rc == 0) rc = share_profile(output, input, share_options);
    if (rc != 0) return exit_status != 0 ? exit_status : rc;
  }
  // After a hangup (closed terminal, dropped SSH) nobody is there to open the URL: the profile is the result.
  if (serving && !hold.interrupted()) {
    hold.release();  // the server handles Ctrl+C itself
    serve.profile_path = output;
    serve.symbolizer = &*symbols;
    if (auto s = server::serve_profile(serve); !s) {
      std::fprintf(stderr, "fxprof: %s\n", s.error().c_str());
      return exit_status != 0 ? exit_status : 1;
    }
  }
  return exit_status;
}

}  // namespace fxprof::cli
