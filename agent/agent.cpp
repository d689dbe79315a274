// fxprof agent (agent.h): the window loop.
#include "agent/agent.h"

#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

#include "agent/sender.h"
#include "base/fd.h"
#include "base/path.h"
#include "base/signals.h"
#include "base/terminal.h"
#include "passes/passes.h"
#include "sinks/output.h"
#include "sinks/pprof.h"

namespace fxprof::agent {
namespace {

uint64_t unix_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// The program a process runs, as service_name: its command line's first word without the folders
// ("/usr/bin/python3 app.py" -> "python3"); "[kernel threads]" as it is.
std::string service_name(const std::string& process_name) {
  if (process_name.empty() || process_name[0] == '[') return process_name.empty() ? "unknown" : process_name;
  const std::string first = process_name.substr(0, process_name.find(' '));
  return std::string(base_name(first));
}

std::string gzipped_pprof(const model::Profile& profile, const sinks::PprofPart& part) {
  std::string bytes;
  const std::unique_ptr<sinks::OutputFile> out = sinks::OutputFile::in_memory(bytes, true);
  sinks::write_pprof(profile, *out, sinks::Clock::Cpu, part);
  (void)out->finish();  // in memory: nothing to fail
  return bytes;
}

// The machine's name, for the host label.
std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// The processes of a cgroup (v2: PATH/cgroup.procs, one pid a line); empty when unreadable.
std::vector<int> cgroup_pids(const std::string& path) {
  std::vector<int> pids;
  auto text = read_file(path + "/cgroup.procs");
  if (!text) return pids;
  std::istringstream in(*text);
  for (int pid; in >> pid;)
    if (pid > 0 && access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0) pids.push_back(pid);
  return pids;
}

// Waits `seconds` unless a recording signal comes first (they are blocked: sigtimedwait takes it);
// returns the signal, 0 on timeout.
int wait_for_signal(double seconds) {
  const sigset_t set = recording_signals();
  timespec ts{static_cast<time_t>(seconds),
              static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// The symbolizer, kept across windows and replaced once told about kMaxKnownLibs distinct binaries.
class Symbols {
 public:
  Symbols(const Options& o) : options_{o.record.symbol_dirs, o.symbol_cache_bytes} { renew(); }
  void name(model::Profile& profile) {
    for (const model::Binary& b : profile.binaries) known_.insert(b.debug_name + "/" + b.breakpad_id);
    if (known_.size() > kMaxKnownLibs) {
      renew();
      for (const model::Binary& b : profile.binaries) known_.insert(b.debug_name + "/" + b.breakpad_id);
    }
    passes::run(profile, {symbolizer_.get(), passes::Naming::Baked, false});  // JIT names, symbols, locks
  }

 private:
  void renew() {
    symbolizer_ = std::make_unique<symbolizer::Symbolizer>(options_);
    known_.clear();
  }
  symbolizer::Options options_;
  std::unique_ptr<symbolizer::Symbolizer> symbolizer_;
  std::set<std::string> known_;
};

// Sends one window to every target; the first error.
Status push_window(const Window& w, const Options& o) {
  share::PushOptions po;
  po.headers = o.headers;
  po.deadline_s = std::max<long>(5, static_cast<long>(o.every_s));
  po.from_unix_s = w.from_unix_ms / 1000;
  po.until_unix_s = (w.until_unix_ms + 999) / 1000;
  if (!o.pyroscope.empty()) {
    if (!o.pyroscope_ingest) {
      if (auto s = share::push_pyroscope_series(o.pyroscope, w.series, po); !s) return s;
    } else {
      for (const share::Series& one : w.series) {  // {service_name=APP, k=v...}: the name is APP{k=v...}
        share::PushOptions each = po;
        each.labels.clear();
        for (const auto& [k, v] : one.labels)
          if (k == "service_name")
            each.app = v;
          else if (k != "__name__")
            each.labels.emplace_back(k, v);
        if (auto s = share::push_pyroscope_ingest(o.pyroscope, one.pprof, each); !s) return s;
      }
    }
  }
  if (!o.parca.empty())
    if (auto s = share::push_parca_series(o.parca, w.series, po); !s) return s;
  return {};
}

double cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

std::vector<share::Series> window_series(const model::Profile& profile, const Options& o, bool ingest) {
  using V = sinks::PprofPart::Values;
  std::vector<share::Series> out;
  for (size_t pi = 0; pi < profile.processes.size(); ++pi) {
    const model::Process& p = profile.processes[pi];
    bool cpu = false, off = false;
    for (const model::Thread& t : p.threads)
      for (const model::Sample& s : t.samples) {
        if (s.stack == model::kNoStack) continue;
        const model::Frame& leaf = profile.frames.get(profile.stacks.frame(s.stack));
        (leaf.kind == model::FrameKind::Label && leaf.category == model::Category::Idle ? off : cpu) = true;
      }
    if (!cpu && !off) continue;
    share::PushOptions labels;
    labels.app = service_name(p.name);
    labels.labels = {{"host", o.host}, {"pid", std::to_string(p.pid)}};
    labels.labels.insert(labels.labels.end(), o.labels.begin(), o.labels.end());
    if (ingest) {
      out.push_back({share::series_labels(share::kCpuSeries, labels), gzipped_pprof(profile, {V::All, pi})});
      continue;
    }
    if (cpu)
      out.push_back({share::series_labels(share::kCpuSeries, labels), gzipped_pprof(profile, {V::Cpu, pi})});
    if (off)
      out.push_back(
          {share::series_labels(share::kOffCpuSeries, labels), gzipped_pprof(profile, {V::OffCpu, pi})});
  }
  return out;
}

namespace {

// Prepares a window on the sender's thread: frames named, the window's times set, series encoded, the
// recording freed; each data-quality problem said once (its label), however many windows have it.
class Preparer {
 public:
  explicit Preparer(const Options& o) : o_(o), symbols_(o) {}
  void operator()(Window& w) {
    const uint64_t t0 = unix_ms();
    model::Profile& prof = w.recording.profile;
    symbols_.name(prof);
    // The window is [from, until): from the previous window's end, so that windows are contiguous.
    prof.meta.start_unix_ms = static_cast<double>(w.from_unix_ms);
    prof.meta.end_monotonic_ns = prof.meta.start_monotonic_ns + (w.until_unix_ms - w.from_unix_ms) * 1000000;
    w.series = window_series(prof, o_, !o_.pyroscope.empty() && o_.pyroscope_ingest);
    for (const model::Meta::Problem& p : prof.meta.data_quality) {
      if (said_.size() > 1000) said_.clear();  // bounded: a problem said again after many others
      if (said_.insert(p.label).second) say("agent: " + p.label + " (said once)");
    }
    w.recording = {};
    if (o_.verbose) {
      std::printf("agent: window %llu: %zu series, named and encoded in %llu ms\n",
                  static_cast<unsigned long long>(w.number), w.series.size(),
                  static_cast<unsigned long long>(unix_ms() - t0));
      std::fflush(stdout);
    }
  }

 private:
  const Options& o_;
  Symbols symbols_;
  std::set<std::string> said_;
};

}  // namespace

int run(const Options& given) {
  Options o = given;
  if (o.host.empty()) o.host = hostname();
  // For the agent's whole life: the recordings read these signals from their signalfd, the waits between
  // them with sigtimedwait, and the sender's thread (started here) never gets one.
  SignalsBlocked blocked;
  Preparer prepare(o);  // used on the sender's thread only
  auto push = [&o](const Window& w) {
    Status s = push_window(w, o);
    if (o.verbose) {  // -v: each try on stdout (the tests wait for these lines)
      std::printf("agent: window %llu: %s\n", static_cast<unsigned long long>(w.number),
                  s ? "sent" : ("not sent: " + s.error()).c_str());
      std::fflush(stdout);
    }
    return s;
  };
  Sender sender([&prepare](Window& w) { prepare(w); }, push, o.attempts, o.every_s);
  uint64_t from = unix_ms();
  uint64_t windows = 0, failed_windows = 0;
  const double cpu0 = cpu_s();
  int stop = 0;
  while (!stop) {
    recorder::Options ro = o.record;
    ro.duration_s = o.every_s;
    ro.quiet = windows > 0;  // the notices once; data-quality problems once each (Preparer)
    if (!o.cgroup.empty()) {
      ro.pids = cgroup_pids(o.cgroup);
      if (ro.pids.empty()) {  // nothing runs there now: an empty window
        stop = wait_for_signal(o.every_s);
        from = unix_ms();
        continue;
      }
    }
    const uint64_t t0 = unix_ms();
    const uint64_t number = windows + failed_windows + 1;
    if (o.verbose)
      ro.on_started = [number] {
        std::printf("agent: window %llu recording\n", static_cast<unsigned long long>(number));
        std::fflush(stdout);
      };
    auto rec = recorder::record(ro);
    const uint64_t until = unix_ms();
    if (!rec) {
      if (windows == 0 && failed_windows == 0) {
        say(rec.error());
        return 1;
      }
      ++failed_windows;
      say("agent: window not recorded: " + rec.error());
      stop = wait_for_signal(o.every_s);
      from = unix_ms();
      continue;
    }
    stop = rec->signal;
    ++windows;
    // -p: the agent's work ends with the processes it was given.
    if (!o.record.pids.empty() && std::none_of(o.record.pids.begin(), o.record.pids.end(),
                                               [](int pid) { return kill(pid, 0) == 0 || errno == EPERM; }))
      stop = SIGTERM;
    if (o.verbose) {
      std::printf("agent: window %llu: %llu samples; %llu ms between windows\n",
                  static_cast<unsigned long long>(number),
                  static_cast<unsigned long long>(rec->stats.samples),
                  static_cast<unsigned long long>(t0 - from));
      std::fflush(stdout);
    }
    sender.offer(Window{number, from, until, std::move(*rec), {}});
    from = until;
    if (o.windows > 0 && static_cast<double>(windows) >= o.windows) break;
  }
  sender.finish();
  const SenderCounts c = sender.counts();
  char cpu[32];
  std::snprintf(cpu, sizeof cpu, "%.2f", cpu_s() - cpu0);
  say("agent: " + std::to_string(windows) + " windows recorded, " + std::to_string(c.sent) + " sent, " +
      std::to_string(c.dropped) + " dropped; " + cpu + " s of CPU");
  return 0;
}

}  // namespace fxprof::agent
