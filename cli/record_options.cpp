#include "cli/record_options.h"

#include <unistd.h>

#include <cstdio>

#include "base/fd.h"
#include "base/terminal.h"
#include "cli/options.h"
#include "counters/events.h"
#include "sinks/exports.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof record [OPTIONS] [--] COMMAND [ARGS...]\n"
    "       fxprof record [OPTIONS] -p PID[,PID...]\n"
    "       fxprof record -a [--duration S] [--per-cpu] [OPTIONS] [-- COMMAND [ARGS...]]\n"
    "\n"
    "Samples every thread of every process COMMAND starts (or of the running processes PID), writes a "
    "Firefox\n"
    "Profiler profile, then serves it on 127.0.0.1 and opens the Firefox Profiler on it. Options must come\n"
    "before COMMAND; what follows COMMAND belongs to it. fxprof exits with the program's exit status.\n"
    "With -a it records every process on the machine until Ctrl+C, --duration or COMMAND's end.\n"
    "\n"
    "A launched COMMAND's markers become the profile's: those of include/fxprof/markers.h and markers.rs\n"
    "(FXPROF_MARKERS is set for it), and NVTX's and Intel ITT's ranges, marks and thread names\n"
    "(NVTX_INJECTION64_PATH and INTEL_LIBITTNOTIFY64 name libfxprof_inject.so, next to fxprof, unless\n"
    "already set: then fxprof says so and leaves them). Not with -p.\n"
    "\n";

constexpr std::string_view kCommand = "record";

// A byte count in [lo, hi] rounded down to a multiple of 8 (the kernel's unit for stack copies).
Take stack_bytes(uint32_t& into, std::string name, bool* given = nullptr) {
  return [&into, name, given](const std::string& v) {
    std::string error;
    auto n = parse_number(name, v, {512, 65528, "a number of bytes"}, error);
    if (!n) return error;
    into = static_cast<uint32_t>(*n) & ~7u;
    if (given) *given = true;
    return std::string();
  };
}

// --export's help, the formats from the sinks' table: "also write the profile as folded, pprof or svg
// beside it (profile.folded,\nprofile.pb.gz, profile.svg; repeatable)".
std::string_view export_help() {
  static const std::string text = [] {
    std::string files;
    for (const sinks::ExportFormat& f : sinks::export_formats())
      files += (files.empty() ? "profile" : ", profile") + std::string(f.extension);
    std::string t = "also write the profile as " + sinks::export_format_names() + " beside it (";
    const size_t comma = files.find(',');
    return t + files.substr(0, comma + 1) + "\n" + files.substr(comma + 2) + "; repeatable)";
  }();
  return text;
}

// What the options say that the checks between them need.
struct Parsed {
  std::string event;  // -e, checked once parsed (its error is not a usage error)
  double heap_rate = 512 * 1024;
  bool freq_given = false, stack_given = false;
  bool off_cpu_given = false;  // --off-cpu
};

// record's table. Long because it is the table: one row an option, in --help's order.
Command record_command(RecordArgs& a, Parsed& p) {
  recorder::Options& rec = a.rec;
  return Command{
      kCommand,
      kUsage,
      {
          heading("Recording:"),
          {"-F", "--freq", "HZ",
           "samples per second per thread (default 1000; lowered to the kernel's\n"
           "perf_event_max_sample_rate with a notice)",
           number("--freq", {0, 1e6, "a number of samples per second", false, true},
                  [&](double n) {
                    rec.frequency_hz = n;
                    p.freq_given = true;
                  })},
          {"-e", "--event", "EVENT",
           "sample on EVENT instead of the clock, with the same stacks: software\n"
           "(page-faults, minor-faults, major-faults, context-switches,\n"
           "cpu-migrations), hardware where a PMU exists (cycles, instructions,\n"
           "cache-misses, branch-misses...) or a tracepoint CATEGORY:NAME\n"
           "(syscalls:sys_enter_write). One sample per period events, so each weighs\n"
           "the same; on-CPU only (no off-CPU samples); one event per recording",
           [&](const std::string& v) {
             if (v.find(',') != std::string::npos)
               return "one event per recording: the stacks of two events would add up in one call tree "
                      "(record once per event, or count several with `fxprof stat -e " +
                      v + "`)";
             p.event = v;
             return std::string();
           }},
          {"-c", "--period", "N",
           "with -e: one sample every N events (default 1 for software events and\n"
           "tracepoints; cycles and instructions 1000003, cache-misses and\n"
           "branch-misses 1009)",
           number("--period", {1, 1e15, "a whole number of events", true},
                  [&](double n) { rec.event_period = static_cast<uint64_t>(n); })},
          {"", "--call-graph", "MODE",
           "dwarf (default: copy the user stack and unwind it with the binaries' CFI;\n"
           "perf's dwarf,BYTES sets --stack-size too) or fp (frame pointers only:\n"
           "cheaper, for programs built with them)",
           [&](const std::string& v) {
             const std::string mode = v.substr(0, v.find(','));
             if (mode != "dwarf" && mode != "fp")
               return std::string("--call-graph must be dwarf[,BYTES] or fp");
             rec.call_graph =
                 mode == "dwarf" ? recorder::CallGraph::Dwarf : recorder::CallGraph::FramePointer;
             if (mode == "fp" && mode != v) return std::string("--call-graph fp takes no size");
             return mode == v ? std::string()
                              : stack_bytes(rec.stack_size, "--call-graph dwarf,BYTES",
                                            &p.stack_given)(v.substr(v.find(',') + 1));
           }},
          {"-g", "--call-graphs", "",
           "accepted as in perf record -g: stacks are always recorded (--call-graph)",
           [](const std::string&) { return std::string(); }},
          {"", "--stack-size", "BYTES",
           "user stack copied per sample in dwarf mode (default 32768, at most 65528;\n"
           "8192 with -e)",
           stack_bytes(rec.stack_size, "--stack-size", &p.stack_given)},
          {"", "--buffer-size", "BYTES",
           "ring buffer per CPU (default: room for ~32 samples and 100 ms at -F in dwarf\n"
           "mode; an ordinary user gets at most kernel.perf_event_mlock_kb plus ulimit -l,\n"
           "split over the CPUs). Larger loses fewer records at high rates; rounded down\n"
           "to a power-of-two pages",
           number("--buffer-size", {4096, 0x1p30, "a number of bytes", true},
                  [&](double n) { rec.buffer_bytes = static_cast<uint64_t>(n); })},
          pid_option(rec.pids,
                     "attach to running processes (and what they start) until Ctrl+C or --duration"),
          {"-a", "--all-cpus", "",
           "record every process on the machine (root, or kernel.perf_event_paranoid\n"
           "<= 0): each its own track named by its command line, those that start and\n"
           "end meanwhile included; kernel threads grouped under \"[kernel threads]\";\n"
           "kernel threads, hard interrupts and softirqs are categories of their own\n"
           "(their shares and the idle CPUs' are said at the end). Stops at Ctrl+C,\n"
           "--duration, or when COMMAND (if given) ends. On-CPU samples unless\n"
           "--off-cpu; no RSS or counter tracks",
           set(rec.system_wide, true)},
          {"", "--per-cpu", "",
           "with -a: also one track per CPU (process \"CPUs\") showing which thread ran\n"
           "on it, sample by sample",
           set(rec.per_cpu, true)},
          duration_option(rec.duration_s, "stop recording after SECONDS (the program keeps running)"),
          {"", "--heap", "[=MODE]",
           "also record heap allocations and frees (launch mode only): sampled\n"
           "(default: Poisson sampling by bytes, unbiased estimates) or full (every\n"
           "allocation and free: exact leaks and peak)",
           [&](const std::string& v) {
             if (v != "sampled" && v != "full") return std::string("--heap must be sampled or full");
             a.rec.heap = heap::Options{};
             a.rec.heap->mode = v == "full" ? heap::Mode::Full : heap::Mode::Sampled;
             return std::string();
           },
           "sampled"},
          {"", "--heap-rate", "BYTES",
           "sampled mode: on average one sample per BYTES allocated (default 524288;\n"
           "1 to 2^40)",
           number("--heap-rate", {1, 0x1p40, "a number of bytes"}, [&](double n) { p.heap_rate = n; })},
          {"", "--usdt", "PROVIDER:NAME[=FORMAT]",
           "also record the USDT probe PROVIDER:NAME of COMMAND or a library it\n"
           "links (`fxprof probes` lists them) as markers, its arguments as fields;\n"
           "FORMAT: one item an argument, comma-separated, [KEY:]%d|%u|%x|%s|- (%s reads\n"
           "a string; KEY name names the marker). Root only; repeatable",
           [&](const std::string& v) {
             auto r = recorder::parse_usdt_request(v);
             if (!r) return r.error();
             a.usdt.push_back(std::move(*r));
             return std::string();
           }},
          {"", "--usdt-pair", "",
           "with --usdt: X__entry/X__return and Xstart/Xdone probes make interval\n"
           "markers (the end of a begin given is attached too)",
           set(a.usdt_pair, true)},
          {"", "--cpu-only", "",
           "on-CPU samples only. By default the profile is wall-clock: time a thread\n"
           "spends blocked or preempted is sampled too, at the same rate, with the\n"
           "stack it waited in, under a [blocked: futex|I/O|sleep|page fault|signal]\n"
           "or [preempted] leaf in the Idle category and no CPU use, plus a marker per\n"
           "wait (\"Lock wait\" with the lock's address for mutexes) and a\n"
           "\"Threads waiting\" track per process with lock waits. As root an eBPF\n"
           "program also names the thread that woke each wait, and for a lock the\n"
           "holder: a \"Wakeup\" marker on the thread that unlocked, with its stack,\n"
           "and the function that held the lock (\"Held by\"). In the Firefox\n"
           "Profiler the CPU graph shows CPU use only and the call tree wall-clock\n"
           "time; for CPU time alone, right-click a [blocked...] node and \"Drop\n"
           "samples with this function\". Stacks of waits need root or\n"
           "kernel.perf_event_paranoid <= 1; otherwise waits are markers without\n"
           "stacks, and fxprof says so",
           set(rec.off_cpu, false)},
          {"", "--off-cpu", "",
           "with -a: record off-CPU time too (off by default there: every sleeping\n"
           "thread of the machine would be sampled)",
           [&](const std::string&) {
             p.off_cpu_given = true;
             return std::string();
           }},
          {"", "--off-cpu-threshold", "MS",
           "a marker for every wait of at least MS milliseconds (default 1; 0: all)",
           number("--off-cpu-threshold", {0, 86400000, "a number of milliseconds"},
                  [&](double n) { rec.off_cpu_threshold_ms = n; })},
          {"", "--off-cpu-stack-size", "BYTES",
           "user stack copied at each context switch in dwarf mode (default 8192,\n"
           "as perf; at most 65528). The kernel copies it in the program's time at\n"
           "every switch: raise it if fxprof says off-CPU stacks are incomplete",
           stack_bytes(rec.off_cpu_stack_size, "--off-cpu-stack-size")},
          {"", "--wakers-from-start", "",
           "start the program only once the eBPF waker tracer (root) is attached,\n"
           "so that every wait's waker is named. By default a launched program\n"
           "starts at once and the tracer attaches beside it (its load takes\n"
           "30-120 ms, more on a busy machine); fxprof says how long the program\n"
           "ran untraced. -p and -a load it first",
           set(rec.wakers_from_start, true)},
          {"-v", "--verbose", "",
           "print what the recorder chose (event, buffer sizes, timings) and\n"
           "how long each pass took (plan, start, read, drain, finish)",
           set(rec.verbose, true)},
          heading("\nOutput:"),
          {"-o", "--output", "FILE",
           "profile file (default profile.json.gz; gzip when it ends in .gz); a\n"
           "regular file is replaced whole, a device, FIFO or \"-\" is written as a\n"
           "stream (with -s), a symlink is followed, a directory is refused",
           store(a.output)},
          {"-s", "--save-only", "",
           "write the profile and exit, without serving it; the profile is made\n"
           "self-contained (symbols baked in) unless --no-symbolicate",
           set(a.save_only, true)},
          {"", "--symbolicate", "",
           "bake symbols into the profile (names, inlined frames) so that it opens\n"
           "without fxprof's server and can be shared",
           set(a.symbolicate, 1)},
          {"", "--no-symbolicate", "", "keep raw addresses (symbolicated lazily by `fxprof load`)",
           set(a.symbolicate, 0)},
          {"", "--symbol-dir", "DIR", "also look for symbol files in DIR (repeatable; also for unwinding)",
           [&](const std::string& v) {
             a.serve.symbols.symbol_dirs.push_back(v);
             rec.symbol_dirs.push_back(v);  // the unwinder looks for .debug_frame there too
             return std::string();
           }},
          {"", "--export", "FORMAT", export_help(),
           [&](const std::string& v) {
             if (!sinks::find_export_format(v)) return "--export must be " + sinks::export_format_names();
             a.exports.push_back(v);
             return std::string();
           }},
          {"-q", "--quiet", "", "no top-functions line after recording", set(a.quiet, true)},
          heading("\nSharing (after the profile is written, from the recording in memory with its names;\n"
                  "see `fxprof share --help` and `fxprof push --help`):"),
          {"", "--share", "",
           "upload the self-contained profile to the Firefox Profiler's public store\n"
           "and print its link instead of serving (asks first; --yes on scripts: without\n"
           "a terminal, --share alone is refused before the program runs)",
           set(a.share, true)},
          {"", "--share-to", "URL",
           "PUT the self-contained profile to URL (your own store) and print the\n"
           "from-url link instead of serving",
           store(a.share_options.share_to)},
          {"", "--yes", "", "with --share: upload without asking", set(a.share_options.yes, true)},
          {"", "--strip-args", "",
           "with --share, --share-to, --push: send the program's name without its arguments",
           [&](const std::string&) {
             a.share_options.strip_args = a.push.strip_args = true;
             return std::string();
           }},
          {"", "--upload-url", "ORIGIN", "with --share: the store (default https://api.profiler.firefox.com)",
           store(a.share_options.upload_origin)},
          {"", "--push", "KIND=URL",
           "also send the profile as pprof to pyroscope=URL (its Push API), pyroscope-ingest=URL\n"
           "(its older /ingest) or parca=ADDR (repeatable)",
           [&](const std::string& v) {
             if (v.rfind("pyroscope=", 0) == 0 && v.size() > 10) {
               a.push.pyroscope = v.substr(10);
             } else if (v.rfind("pyroscope-ingest=", 0) == 0 && v.size() > 17) {
               a.push.pyroscope = v.substr(17);
               a.push.pyroscope_ingest = true;
             } else if (v.rfind("parca=", 0) == 0 && v.size() > 6) {
               a.push.parca = v.substr(6);
             } else {
               return std::string("--push needs pyroscope=URL, pyroscope-ingest=URL or parca=ADDR");
             }
             return std::string();
           }},
          {"", "--push-label", "NAME=VALUE", "a label of the pushed series (repeatable)",
           [&](const std::string& v) { return add_label(v, a.push.options.labels); }},
          heading("\nServing (unless --save-only, --share or --share-to):"),
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
      nullptr};
}

}  // namespace

std::optional<int> parse_record_args(std::span<char*> args, RecordArgs& a) {
  recorder::Options& rec = a.rec;
  rec.off_cpu = true;  // wall-clock by default; --cpu-only for on-CPU samples alone
  Parsed p;
  if (auto exit = parse_options(record_command(a, p), args, &rec.command)) return exit;
  if (!p.event.empty()) {
    auto e = counters::find_event(p.event);
    if (!e) {
      std::fprintf(stderr, "fxprof record: %s\n", e.error().c_str());
      return 2;
    }
    rec.event = std::move(*e);
  }
  if (rec.per_cpu && !rec.system_wide) return usage_error(kCommand, "--per-cpu goes with -a");
  if (p.off_cpu_given && !rec.system_wide)
    return usage_error(kCommand, "--off-cpu goes with -a (record is wall-clock by default elsewhere)");
  // -a: on-CPU samples unless asked: the blocked time of every sleeping thread of the machine would be
  // most of the profile (800k samples in 8 s here) and most of the reader's work.
  if (rec.system_wide && !p.off_cpu_given) rec.off_cpu = false;
  if (p.off_cpu_given && !rec.off_cpu) return usage_error(kCommand, "give --off-cpu or --cpu-only, not both");
  if (rec.system_wide && !rec.pids.empty())
    return usage_error(kCommand, "-a records every process: give no -p");
  if (rec.system_wide && rec.heap)
    return usage_error(kCommand, "--heap records programs fxprof starts, not the whole machine (-a)");
  if (rec.command.empty() && rec.pids.empty() && !rec.system_wide)
    return usage_error(kCommand, "nothing to record: give a command, -p PID or -a");
  if (!rec.command.empty() && !rec.pids.empty())
    return usage_error(kCommand, "give either a command or -p PID, not both");

  if (a.share && !a.share_options.share_to.empty())
    return usage_error(kCommand, "give --share or --share-to, not both");
  if (a.share_options.yes && !a.share) return usage_error(kCommand, "--yes goes with --share");
  // The upload would be refused after the program ran (no terminal to ask on): refused before it runs.
  if (a.share && !a.share_options.yes && (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO)))
    return usage_error(
        kCommand,
        "--share asks before uploading and there is no terminal to ask on: give --yes to upload "
        "without asking");
  if (rec.event_period && !rec.event) return usage_error(kCommand, "--period applies to -e EVENT");
  if (rec.event && p.freq_given)
    return usage_error(kCommand,
                       "-F sets the clock's rate; with -e the samples follow the event: use -c PERIOD");
  if (rec.event) rec.off_cpu = false;  // event samples only: wall-clock samples would mix with them
  // Events come in bursts (a fault or a write per microsecond): 8 KiB stack copies, as perf's, keep 4x more
  // of them in the buffer than 32 KiB ones while the reader unwinds.
  if (rec.event && !p.stack_given) rec.stack_size = 8192;
  // A ring that cannot hold one sample loses every one of them without a record of it.
  uint64_t ring = 4096;  // --buffer-size rounded down to a power of two pages, as the recorder maps it
  while (ring * 2 <= rec.buffer_bytes) ring *= 2;
  if (rec.buffer_bytes && rec.call_graph == recorder::CallGraph::Dwarf &&
      ring < uint64_t{rec.stack_size} + 1024)
    return usage_error(kCommand,
                       "--buffer-size " + std::to_string(rec.buffer_bytes) + " (" + std::to_string(ring) +
                           " once rounded) holds no DWARF sample of --stack-size " +
                           std::to_string(rec.stack_size) + " (the stack copy + ~1 KiB): give at least " +
                           std::to_string(2 * ring) + " or a smaller --stack-size");

  if (rec.heap && !rec.pids.empty())
    return usage_error(kCommand,
                       "--heap records programs fxprof starts; it cannot attach to a running process (-p)");
  if (rec.heap) rec.heap->rate_bytes = p.heap_rate;
  if (!a.usdt.empty() && rec.command.empty())
    return usage_error(kCommand, "--usdt records programs fxprof starts: give a command");
  if (a.usdt_pair && a.usdt.empty()) return usage_error(kCommand, "--usdt-pair goes with --usdt");

  // An output we cannot write (a directory, a read-only folder) is found now, not after the program ran.
  auto output_kind = AtomicFile::check(a.output);
  if (!output_kind) {
    say(output_kind.error());
    return 1;
  }
  // The server reads the profile back from its file: a device or pipe cannot be served.
  if (*output_kind == OutputKind::kStream && !a.save_only)
    return usage_error(kCommand,
                       a.output + " is not a regular file: add --save-only to write the profile to it");
  // The exports are named after -o (profile.svg beside profile.json.gz): a stream has no name to put them
  // beside.
  if (*output_kind == OutputKind::kStream && !a.exports.empty())
    return usage_error(kCommand, "--export writes beside -o, and " + a.output +
                                     " is not a regular file: give -o a file name");
  return std::nullopt;
}

}  // namespace fxprof::cli
