// --critical-path's thread and interval (cli/critical_path.h).
#include "cli/critical_path.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "model/markers.h"

namespace fxprof::cli {

namespace {

std::optional<double> parse_ms(std::string_view s) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

std::vector<Option> critical_path_options(CriticalPathOptions& o) {
  return {
      {"", "--critical-path", "",
       "the critical path of a thread instead: while it ran its own CPU, while it\n"
       "waited the thread that woke it, back to the wait's start, recursively\n"
       "(record with --off-cpu as root for the wakers); with --marker NAME over\n"
       "each interval of the program's NAME markers on that thread",
       set(o.on, true)},
      {"", "--thread", "NAME|TID", "(--critical-path) the thread (default: the main thread)",
       store(o.thread)},
      {"", "--time-range", "START,END",
       "(--critical-path) only this interval, in ms of the recording's timeline\n"
       "(as the Firefox Profiler shows it)",
       store(o.time_range)},
  };
}

Result<CriticalPaths> critical_paths(model::Profile& p, const CriticalPathOptions& o) {
  CriticalPaths out;
  uint32_t tid = 0;
  const bool by_tid =
      !o.thread.empty() && std::from_chars(o.thread.data(), o.thread.data() + o.thread.size(), tid).ptr ==
                               o.thread.data() + o.thread.size();
  for (const model::Process& proc : p.processes)
    for (const model::Thread& t : proc.threads) {
      if (out.thread) break;
      const bool match = o.thread.empty() ? t.is_main : by_tid ? t.tid == tid : t.name == o.thread;
      if (match) {
        out.proc = &proc;
        out.thread = &t;
      }
    }
  if (!out.thread && o.thread.empty() && !p.processes.empty() && !p.processes[0].threads.empty()) {
    out.proc = &p.processes[0];
    out.thread = &p.processes[0].threads[0];
  }
  if (!out.thread) return Err("no thread '" + o.thread + "' in the profile (give its name or tid)");
  const model::Thread& t = *out.thread;
  if (!o.marker.empty()) {
    const model::StringId name = p.strings.intern(o.marker);
    const std::vector<model::MarkerInterval> intervals = model::program_intervals(t, name);
    if (intervals.empty())
      return Err("thread " + t.name + " has no interval marker named '" + o.marker +
                 "' (`fxprof report --markers` lists the program's markers)");
    for (const model::MarkerInterval& m : intervals)
      out.paths.push_back(model::critical_path(p, *out.proc, t, m.start_ns, m.end_ns));
    out.interval = "marker " + o.marker + " (" + std::to_string(intervals.size()) + " interval" +
                   (intervals.size() == 1 ? ")" : "s)");
    return out;
  }
  auto [lo, hi] = model::thread_span(t);
  out.interval = "the whole thread";
  if (!o.time_range.empty()) {
    const size_t comma = o.time_range.find(',');
    const auto a = comma == std::string::npos ? std::nullopt : parse_ms(o.time_range.substr(0, comma));
    const auto b = comma == std::string::npos ? std::nullopt : parse_ms(o.time_range.substr(comma + 1));
    if (!a || !b || *b <= *a)
      return Err("--time-range wants START,END in ms, END after START ('" + o.time_range + "')");
    const uint64_t origin = p.processes.empty() ? 0 : p.processes[0].start_ns;
    lo = std::max(lo, origin + static_cast<uint64_t>(*a * 1e6));
    hi = std::min(hi, origin + static_cast<uint64_t>(*b * 1e6));
    if (hi <= lo) return Err("--time-range " + o.time_range + " is outside thread " + t.name + "'s life");
    out.interval = o.time_range + " ms";
  }
  out.paths.push_back(model::critical_path(p, *out.proc, t, lo, hi));
  return out;
}

void keep_only_critical_path(model::Profile& p, const CriticalPaths& paths) {
  const uint64_t interval = static_cast<uint64_t>(std::max(p.meta.interval_ms, 0.001) * 1e6);
  model::Thread synthetic;
  for (const model::CriticalPath& path : paths.paths) {
    model::Thread part = model::critical_path_thread(p, path, paths.thread->name, interval);
    if (synthetic.name.empty())
      synthetic = std::move(part);
    else
      synthetic.samples.insert(synthetic.samples.end(), part.samples.begin(), part.samples.end());
  }
  synthetic.is_main = false;
  model::Process proc;
  proc.pid = paths.proc->pid;
  proc.name = paths.proc->name;
  proc.start_ns = paths.proc->start_ns;
  proc.libs = paths.proc->libs;
  proc.threads.push_back(std::move(synthetic));
  p.processes.clear();
  p.processes.push_back(std::move(proc));
}

}  // namespace fxprof::cli
