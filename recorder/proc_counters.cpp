#include "recorder/proc_counters.h"

#include <time.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace fxprof::recorder {

namespace {

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Fields 10 (minflt) and 12 (majflt) of /proc/PID/stat, counted after the ')' that ends the name. False for
// a zombie (state Z or X), as for a process gone: it exited, and a read now would stamp its last values
// after its end (its exit record may still be in a ring: a round takes only what is older than itself).
bool faults(const std::string& stat, uint64_t& minor, uint64_t& major) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  const char* p = stat.c_str() + paren + 1;
  const char* state = p + std::strspn(p, " ");
  if (*state == 'Z' || *state == 'X') return false;
  uint64_t v[10] = {};
  for (int field = 3; field <= 12; ++field) {
    while (*p == ' ') ++p;
    if (!*p) return false;
    char* end = nullptr;
    const unsigned long long x = std::strtoull(p, &end, 10);
    if (end == p) {  // the state letter (field 3)
      while (*p && *p != ' ') ++p;
    } else {
      p = end;
    }
    if (field >= 3) v[field - 3] = x;
  }
  minor = v[10 - 3];
  major = v[12 - 3];
  return true;
}

}  // namespace

void ProcCounters::add(Series& s, int kind, uint64_t now, uint64_t value) {
  const int64_t delta =
      s.seen || !attached_ ? static_cast<int64_t>(value - std::min(value, s.last[kind])) : 0;
  s.last[kind] = std::max(value, s.last[kind]);
  s.moved[kind] |= delta != 0;
  s.samples[kind].read(now, delta, static_cast<uint64_t>(delta));
}

void ProcCounters::tick(const model::Profile& profile, uint64_t now) {
  if (now < last_tick_ + 9'000'000) return;  // the RSS tick's own pace (10 ms), early wake-ups included
  last_tick_ = now;
  const uint64_t t0 = mono_ns();
  ++ticks_;
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    const model::Process& p = profile.processes[i];
    if (p.end_ns || p.libs.empty()) continue;
    const std::string dir = "/proc/" + std::to_string(p.pid);
    auto stat = procfs_.read(dir + "/stat");
    uint64_t minor = 0, major = 0;
    if (!stat || !faults(*stat, minor, major)) continue;  // gone: its last values stand
    Series& s = series_[static_cast<uint32_t>(i)];
    // A launched process's tracks start with it, not a tick later: what its first tick found happened since
    // (a 93 ms program's tracks began at 10 ms).
    if (!s.seen && !attached_ && p.start_ns && p.start_ns < now)
      for (model::CounterSeries& c : s.samples) c.read(p.start_ns, 0);
    add(s, kMinor, now, minor);
    add(s, kMajor, now, major);
    // Threads: the sum of what each live thread added since the last tick (an exited thread keeps its share).
    uint64_t delay = 0, slices = 0;
    for (const model::Thread& t : p.threads) {
      if (t.end_ns) continue;
      auto ss = procfs_.read(dir + "/task/" + std::to_string(t.tid) + "/schedstat");
      if (!ss) continue;
      char* end = nullptr;
      std::strtoull(ss->c_str(), &end, 10);  // time on the CPU
      const uint64_t d = std::strtoull(end, &end, 10);
      const uint64_t n = std::strtoull(end, nullptr, 10);
      auto [it, fresh] = s.threads.try_emplace(t.tid, 0, 0);
      if (fresh && attached_ && !s.seen) it->second = {d, n};  // ran before we attached
      delay += d - std::min(d, it->second.first);
      slices += n - std::min(n, it->second.second);
      it->second = {std::max(d, it->second.first), std::max(n, it->second.second)};
    }
    s.seen = true;  // from here on the deltas count
    // The cumulative sums: what was there plus this tick's deltas.
    add(s, kSwitches, now, s.last[kSwitches] + slices);
    add(s, kRunDelay, now, s.last[kRunDelay] + delay / 1000);  // in microseconds
  }
  tick_ns_ += mono_ns() - t0;
}

void ProcCounters::finish(model::Profile& profile) {
  static const char* const kNames[kKinds][2] = {
      {"Page faults (minor)",
       "Minor page faults (pages touched for the first time or copied on write) per sample"},
      {"Page faults (major)", "Page faults that waited for the disk"},
      {"Context switches",
       "Times the process's threads were switched onto a CPU (/proc/PID/task/TID/schedstat)"},
      {"Run-queue delay (µs)",  // the unit in the name: the tooltip of a rate track shows the name and the
                                // value
       "Microseconds the process's threads waited runnable for a CPU (schedstat run delay)"},
  };
  for (auto& [index, s] : series_) {
    if (index >= profile.processes.size()) continue;
    const uint64_t end = model::counter_end(profile, profile.processes[index], 0);
    for (int k = 0; k < kKinds; ++k) {
      // Faults and switches always (a flat line says "none"); major faults and run delay only when they
      // happened.
      if (!s.moved[k] && (k == kMajor || k == kRunDelay)) continue;
      if (s.samples[k].empty()) continue;
      profile.processes[index].counters.push_back(
          {kNames[k][0], "Scheduling", kNames[k][1], s.samples[k].finish(end)});
    }
  }
  series_.clear();
}

}  // namespace fxprof::recorder
