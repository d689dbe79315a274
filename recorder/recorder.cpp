// The recorder's entry (recorder.h): record() runs a Session (session.h) pass by pass; and what is said about
// a recording without samples (descendants, no_samples_message).
#include "recorder/recorder.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <utility>

#include "base/path.h"
#include "recorder/host.h"
#include "recorder/session.h"

namespace fxprof::recorder {

namespace internal {

uint64_t now_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// User plus system CPU time of a rusage, in milliseconds.
double cpu_ms(const rusage& ru) {
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

// The recording, as the passes it goes through, in order; a pass that fails ends it with its error. -v
// prints how long each took (one line at the end).
Result<Recording> Session::run() {
  const std::pair<const char*, Status (Session::*)()> passes[] = {
      {"plan", &Session::plan_buffers},
      {"start", system_   ? &Session::start_system
                : launch_ ? &Session::start_launch
                          : &Session::start_attach},
      {"read", &Session::read_until_stop},
      {"drain", &Session::drain},
      {"finish", &Session::finish_profile},
      {"summarize", &Session::summarize},
  };
  for (const auto& [name, step] : passes) {
    if (auto s = pass(name, step); !s) return std::move(s).take_error();
    if (std::string_view(name) == "start") running_ns_ = now_ns(CLOCK_MONOTONIC);
    if (opt_.on_started && std::string_view(name) == "start") opt_.on_started();
  }
  // A signal that came while the recording ended would be drained unseen by the guard.
  signalfd_siginfo si;
  while (signals_ && signals_->next(si)) rec_.signal = static_cast<int>(si.ssi_signo);
  return std::move(rec_);
}

// Runs one pass and keeps its wall time for the -v line.
Status Session::pass(const char* name, Status (Session::*step)()) {
  const uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  Status s = (this->*step)();
  phases_.push_back({name, static_cast<double>(now_ns(CLOCK_MONOTONIC) - t0) / 1e6});
  return s;
}

}  // namespace internal

std::vector<ProcessInfo> descendants(int pid, size_t limit) {
  // pid -> (ppid, comm) of every process; /proc/PID/stat is "pid (comm) state ppid ...", comm may hold
  // spaces and parentheses: the last ')' ends it.
  std::vector<std::pair<int, ProcessInfo>> all;  // (ppid, process)
  for (uint32_t id : live_procfs().list("/proc")) {
    if (id == 0) continue;
    auto stat = live_procfs().read("/proc/" + std::to_string(id) + "/stat");
    if (!stat) continue;
    size_t open = stat->find('('), close = stat->rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(stat->c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
    all.push_back({ppid, {static_cast<int>(id), stat->substr(open + 1, close - open - 1)}});
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.second.pid < b.second.pid; });
  std::vector<ProcessInfo> out;
  std::vector<int> frontier{pid};
  while (!frontier.empty() && out.size() < limit) {
    std::vector<int> next;
    for (int parent : frontier)
      for (const auto& [ppid, info] : all)
        if (ppid == parent && out.size() < limit) {
          out.push_back(info);
          next.push_back(info.pid);
        }
    frontier = std::move(next);
  }
  return out;
}

std::string no_samples_message(const Options& options, const Stats& stats) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", stats.duration_s);
  if (!stats.not_followed.empty())  // the kernel dropped the events: CPU use was not the reason
    return "no samples: " + stats.not_followed + "; no profile written";
  if (options.pids.empty()) {
    std::string program =
        options.command.empty() ? "the program" : std::string(base_name(options.command[0]));
    if (options.event)
      return "no samples: " + program + " and what it started had fewer than " +
             std::to_string(stats.event_period) + " " + options.event->name + " events (one sample per " +
             std::to_string(stats.event_period) +
             "); nothing to profile, no profile written. Lower the period (-c)";
    std::string msg =
        "no samples: " + program + " and what it started used less CPU than one sampling interval";
    if (stats.program_cpu_ms >= 0) {
      char cpu[64];
      std::snprintf(cpu, sizeof cpu, " (%.1f ms of CPU", stats.program_cpu_ms);
      msg += std::string(cpu) + " at " + std::to_string(static_cast<long>(stats.frequency_hz)) + " Hz)";
    }
    return msg + "; nothing to profile, no profile written. Profile a longer run or raise -F";
  }
  std::string list, msg = "no samples: ";
  std::vector<ProcessInfo> kids;
  for (size_t i = 0; i < options.pids.size(); ++i) {
    const int pid = options.pids[i];
    list += (i ? "," : "") + std::to_string(pid);
    msg += (i ? ", " : "") + std::string("pid ") + std::to_string(pid);
    if (auto comm = live_procfs().read("/proc/" + std::to_string(pid) + "/comm"); comm && !comm->empty())
      msg += " (" + comm->substr(0, comm->find('\n')) + ")";
    for (ProcessInfo& k : descendants(pid)) kids.push_back(std::move(k));
  }
  const bool many = options.pids.size() > 1;
  msg += std::string(" used no CPU during the ") + secs + " recorded; no profile written.";
  if (kids.empty())
    return msg + (many ? " They have" : " It has") +
           " no child processes either: record while it is busy, or longer (-d)";
  msg += std::string(" ") + (many ? "Their" : "Its") +
         " running child processes were not recorded (-p follows what the processes start later, not what "
         "already runs):";
  std::string add;
  for (const ProcessInfo& k : kids) {
    msg += " " + std::to_string(k.pid) + " (" + k.name + ")";
    add += "," + std::to_string(k.pid);
  }
  return msg + ". Add them: -p " + list + add;
}

Result<Recording> record(const Options& options) {
  internal::Session s(options);
  return s.run();
}

}  // namespace fxprof::recorder
