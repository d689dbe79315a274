// fxprof agent (agent.h): the window loop.
#include "agent/agent.h"

#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  Symbols(const Options& o) : options_{o.record.symbol_dirs, o.symbol_cache_bytes} {
    options_.dwarf = false;  // function names only (symbolizer.h Options::dwarf)
    renew();
  }
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

// The agent's resident file pages (RssFile in /proc/self/status), in kB; 0 when unreadable.
unsigned long rss_file_kb() {
  auto status = read_file("/proc/self/status");
  if (!status) return 0;
  const size_t at = status->find("RssFile:");
  return at == std::string::npos ? 0 : std::strtoul(status->c_str() + at + 8, nullptr, 10);
}

// Gives back the pages of the files the recorder's unwinder mapped whole to read their CFI (base/fd.h
// map_file: read-only, private): page cache, yet counted in the agent's RSS while they stay mapped
// (chromium, libLLVM, cc1plus...: 350 MB after 7 minutes of a busy machine). Only past kFilePagesKb: giving
// them back every window cost more than anything else the agent did (a TLB flush on each CPU per mapping,
// then a fault per page the unwinder touches again), so the pages the unwinder uses every window stay.
// Only mappings that hold pages and no private (copied-on-write) one: a loaded library's relocated pages
// are not file content and must stay.
void release_file_pages() {
  if (rss_file_kb() < kFilePagesKb) return;
  std::FILE* f = std::fopen("/proc/self/smaps", "re");
  if (!f) return;
  char line[512];
  uintptr_t start = 0, end = 0;
  bool candidate = false;
  unsigned long rss = 0;
  while (std::fgets(line, sizeof line, f)) {
    char perms[8] = {}, path[256] = {};
    unsigned long s = 0, e = 0;
    // A mapping's line ("start-end perms offset dev inode path"); its fields' lines ("Rss: 4 kB") never
    // parse that far.
    if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &s, &e, perms, path) >= 3) {
      start = s;
      end = e;
      candidate = std::strcmp(perms, "r--p") == 0 && path[0] == '/';
      rss = 0;
    } else if (candidate && std::strncmp(line, "Rss:", 4) == 0) {
      rss = std::strtoul(line + 4, nullptr, 10);
    } else if (candidate && std::strncmp(line, "Anonymous:", 10) == 0) {
      if (rss > 0 && std::strtoul(line + 10, nullptr, 10) == 0)
        (void)madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
      candidate = false;
    }
  }
  std::fclose(f);
}

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
        if (s.stack != model::kNoStack) (profile.off_cpu(s.stack) ? off : cpu) = true;
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
    // Not the agent itself: naming its own samples would load its own symbols (80 MB for an unstripped
    // fxprof, more than all else it holds) for well under 1 % of a core's samples.
    std::erase_if(prof.processes,
                  [](const model::Process& p) { return p.pid == static_cast<uint32_t>(getpid()); });
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
    if (const uint64_t now = unix_ms(); now - trimmed_ms_ >= kGiveBackEveryMs) {
      malloc_trim(0);  // what the windows and evicted symbols freed goes back to the system (RSS stays flat)
      trimmed_ms_ = now;
    }
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
  uint64_t trimmed_ms_ = 0;
};

}  // namespace

// One recording per kRenewWindows windows (or until a signal, the -p processes' end, a cgroup's new
// process): its samples are cut into windows as it runs (recorder.h Options::window_s), so the events, the
// processes' state and the unwind tables are made once, not every window.
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
  uint64_t windows = 0, failed_windows = 0, recordings = 0;
  const double cpu0 = cpu_s();
  bool enough = false;  // --windows reached
  auto started = [&o, &windows, &failed_windows] {
    if (!o.verbose) return;
    std::printf("agent: window %llu recording\n",
                static_cast<unsigned long long>(windows + failed_windows + 1));
    std::fflush(stdout);
  };
  auto offer = [&](recorder::Recording& rec) {
    const uint64_t until = unix_ms();
    ++windows;
    if (o.verbose) {
      size_t samples = 0;
      for (const model::Process& p : rec.profile.processes)
        for (const model::Thread& t : p.threads) samples += t.samples.size();
      std::printf("agent: window %llu: %zu samples\n", static_cast<unsigned long long>(windows), samples);
      std::fflush(stdout);
    }
    sender.offer(Window{windows, from, until, std::move(rec), {}});
    from = until;
    enough = o.windows > 0 && static_cast<double>(windows) >= o.windows;
  };
  int stop = 0;
  while (!stop && !enough) {
    recorder::Options ro = o.record;
    ro.window_s = o.every_s;
    ro.quiet = recordings > 0;  // the notices once; data-quality problems once each (Preparer)
    // Rings for 19 Hz, not the recorder's 4 kHz ones (16 MiB a CPU with -a): 1 MiB holds ~30 DWARF
    // samples, over a second at the agent's rate (a loaded machine delays the reader; 512 KiB lost
    // records), and the reader empties them every 25 ms.
    if (ro.buffer_bytes == 0) ro.buffer_bytes = kRingBytes;
    std::set<int> given_pids;
    if (!o.cgroup.empty()) {
      ro.pids = cgroup_pids(o.cgroup);
      if (ro.pids.empty()) {  // nothing runs there now: an empty window
        stop = wait_for_signal(o.every_s);
        from = unix_ms();
        continue;
      }
      given_pids.insert(ro.pids.begin(), ro.pids.end());
    }
    uint64_t in_this = 0;
    ro.on_started = started;
    uint64_t released_ms = unix_ms();
    ro.on_window = [&](recorder::Recording& w) {
      offer(w);
      if (const uint64_t now = unix_ms(); now - released_ms >= kGiveBackEveryMs) {
        release_file_pages();  // on the recording thread: the unwinder is not reading them now
        released_ms = now;
      }
      if (enough) return false;
      started();
      // A process that joined the cgroup from outside is not followed: a new recording attaches it.
      if (!o.cgroup.empty())
        for (int pid : cgroup_pids(o.cgroup))
          if (!given_pids.count(pid) &&
              !std::any_of(w.profile.processes.begin(), w.profile.processes.end(),
                           [pid](const model::Process& p) { return static_cast<int>(p.pid) == pid; }))
            return false;
      return ++in_this < kRenewWindows;
    };
    auto rec = recorder::record(ro);
    ++recordings;
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
    // -p: the agent's work ends with the processes it was given.
    if (!o.record.pids.empty() && std::none_of(o.record.pids.begin(), o.record.pids.end(),
                                               [](int pid) { return kill(pid, 0) == 0 || errno == EPERM; }))
      stop = SIGTERM;
    if (!enough) offer(*rec);  // the part since the last cut: the last window, or one cut short by renewal
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
