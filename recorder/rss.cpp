#include "recorder/rss.h"

#include <fcntl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

namespace fxprof::recorder {

namespace {

// Resident pages (the second field of statm's text); 0 when it is gone or a zombie.
uint64_t resident_pages(const Result<std::string>& statm) {
  if (!statm) return 0;
  const char* buf = statm->c_str();
  char* end = nullptr;
  std::strtoull(buf, &end, 10);  // size
  if (end == buf) return 0;
  return std::strtoull(end, nullptr, 10);
}

}  // namespace

RssSampler::RssSampler(Procfs& procfs)
    : procfs_(procfs), page_size_(static_cast<uint64_t>(sysconf(_SC_PAGESIZE))) {
  timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (timer_.valid()) {
    itimerspec spec{};
    spec.it_interval.tv_nsec = static_cast<long>(kIntervalNs);
    spec.it_value.tv_nsec = static_cast<long>(kIntervalNs);
    if (timerfd_settime(timer_.get(), 0, &spec, nullptr) != 0) timer_.reset();
  }
}

void RssSampler::tick(const model::Profile& profile, uint64_t now) {
  if (timer_.valid()) {
    uint64_t expirations;
    while (read(timer_.get(), &expirations, sizeof expirations) > 0) {
    }
  }
  if (now < next_ns_) return;
  next_ns_ = now + kIntervalNs - kIntervalNs / 10;  // a timer wake-up a little early still samples
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    const model::Process& p = profile.processes[i];
    if (p.end_ns || p.libs.empty()) continue;
    const uint64_t pages = resident_pages(procfs_.read("/proc/" + std::to_string(p.pid) + "/statm"));
    if (pages == 0) continue;  // gone, or exited and not yet reaped: its last value stands
    Series& s = series_[static_cast<uint32_t>(i)];
    const auto bytes = static_cast<int64_t>(pages * page_size_);
    if (!s.samples.empty() && bytes == s.last) {
      s.last_read_ns = now;
      continue;
    }
    // The front end draws straight lines between samples: the last read of the old value before the new
    // one makes the change a step, not a ramp from the previous change.
    if (!s.samples.empty() && s.last_read_ns > s.samples.back().time_ns)
      s.samples.push_back({s.last_read_ns, 0, 0});
    s.samples.push_back({now, bytes - s.last, 0});
    s.last = bytes;
    s.last_read_ns = now;
  }
}

void RssSampler::finish(model::Profile& profile) {
  for (auto& [index, s] : series_) {
    if (index >= profile.processes.size() || s.samples.empty()) continue;
    // The last value holds to the process's end (or the recording's): the track covers its whole life.
    const model::Process& p = profile.processes[index];
    const uint64_t end = p.end_ns ? *p.end_ns : profile.meta.end_monotonic_ns.value_or(s.last_read_ns);
    if (end > s.samples.back().time_ns) s.samples.push_back({end, 0, 0});
    profile.processes[index].counters.push_back(
        {"RSS", "Memory", "Resident set size: the process's pages in RAM (/proc/PID/statm)",
         std::move(s.samples)});
  }
  series_.clear();
}

}  // namespace fxprof::recorder
