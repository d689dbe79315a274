#include "recorder/rss.h"

#include <fcntl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

namespace fxprof::recorder {

namespace {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Resident pages of `pid` (the second field of /proc/PID/statm); 0 when it is gone or a zombie.
uint64_t resident_pages(uint32_t pid) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%u/statm", pid);
  UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return 0;
  char buf[128];
  ssize_t n = read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoull(buf, &end, 10);  // size
  if (end == buf) return 0;
  return std::strtoull(end, nullptr, 10);
}

}  // namespace

RssSampler::RssSampler() : page_size_(static_cast<uint64_t>(sysconf(_SC_PAGESIZE))) {
  timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (timer_.valid()) {
    itimerspec spec{};
    spec.it_interval.tv_nsec = static_cast<long>(kIntervalNs);
    spec.it_value.tv_nsec = static_cast<long>(kIntervalNs);
    if (timerfd_settime(timer_.get(), 0, &spec, nullptr) != 0) timer_.reset();
  }
}

void RssSampler::tick(const model::Profile& profile) {
  if (timer_.valid()) {
    uint64_t expirations;
    while (read(timer_.get(), &expirations, sizeof expirations) > 0) {
    }
  }
  const uint64_t now = monotonic_ns();
  if (now < next_ns_) return;
  next_ns_ = now + kIntervalNs - kIntervalNs / 10;  // a timer wake-up a little early still samples
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    const model::Process& p = profile.processes[i];
    if (p.end_ns || p.libs.empty()) continue;
    const uint64_t pages = resident_pages(p.pid);
    if (pages == 0) continue;  // gone, or exited and not yet reaped: its last value stands
    Series& s = series_[static_cast<uint32_t>(i)];
    const auto bytes = static_cast<int64_t>(pages * page_size_);
    if (!s.samples.empty() && bytes == s.last) continue;
    s.samples.push_back({now, bytes - s.last, 0});
    s.last = bytes;
  }
}

void RssSampler::finish(model::Profile& profile) {
  for (auto& [index, s] : series_) {
    if (index >= profile.processes.size() || s.samples.empty()) continue;
    profile.processes[index].counters.push_back(
        {"RSS", "Memory", "Resident set size: the process's pages in RAM (/proc/PID/statm)",
         std::move(s.samples)});
  }
  series_.clear();
}

}  // namespace fxprof::recorder
