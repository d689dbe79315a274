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
    s.samples.read(now, bytes - s.last);
    s.last = bytes;
  }
}

void RssSampler::finish(model::Profile& profile) {
  for (auto& [index, s] : series_) {
    if (index >= profile.processes.size() || s.samples.empty()) continue;
    const uint64_t end = model::counter_end(profile, profile.processes[index], 0);
    profile.processes[index].counters.push_back(
        {"RSS", "Memory", "Resident set size: the process's pages in RAM (/proc/PID/statm)",
         s.samples.finish(end)});
  }
  series_.clear();
}

}  // namespace fxprof::recorder
