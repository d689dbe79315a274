#include "agent/sender.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/terminal.h"

namespace fxprof::agent {
namespace {

// "12:00:00-12:00:10" (UTC) for the lines about a window.
std::string span_text(const Window& w) {
  auto hms = [](uint64_t ms) {
    const time_t t = static_cast<time_t>(ms / 1000);
    tm parts{};
    gmtime_r(&t, &parts);
    char buf[16];
    std::strftime(buf, sizeof buf, "%H:%M:%S", &parts);
    return std::string(buf);
  };
  return hms(w.from_unix_ms) + "-" + hms(w.until_unix_ms) + " UTC";
}

}  // namespace

Sender::Sender(std::function<void(Window&)> prepare, std::function<Status(const Window&)> push, int attempts,
               double max_backoff_s)
    : prepare_(std::move(prepare)),
      push_(std::move(push)),
      attempts_(std::max(1, attempts)),
      max_backoff_s_(max_backoff_s) {
  thread_ = std::thread([this] { loop(); });
}

Sender::~Sender() { finish(); }

void Sender::offer(Window w) {
  std::lock_guard lock(mu_);
  if (waiting_.size() >= kMaxWaiting) {
    ++counts_.dropped;
    ++failing_since_;
    say("agent: window " + span_text(waiting_.front()) + " dropped unsent: " + std::to_string(kMaxWaiting) +
        " windows were waiting (" + std::to_string(counts_.dropped) + " dropped so far)");
    waiting_.pop_front();
  }
  waiting_.push_back(std::move(w));
  cv_.notify_all();
}

void Sender::finish() {
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

SenderCounts Sender::counts() {
  std::lock_guard lock(mu_);
  return counts_;
}

bool Sender::try_once(const Window& w) {
  Status s = push_(w);
  std::lock_guard lock(mu_);
  ++counts_.tries;
  if (s) {
    ++counts_.sent;
    if (failing_since_ > 0)
      say("agent: sending again (window " + span_text(w) + ") after " + std::to_string(failing_since_) +
          " dropped window(s)");
    failing_since_ = 0;
    return true;
  }
  last_error_ = s.error();
  return false;
}

// Takes the waiting window, tries it up to attempts_ times (1 s, 2 s, 4 s... apart, at most the window's
// length; none once stopping), and drops it with a line when every try failed.
void Sender::loop() {
  for (;;) {
    Window w;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return !waiting_.empty() || stopping_; });
      if (waiting_.empty()) return;  // stopping, nothing left
      w = std::move(waiting_.front());
      waiting_.pop_front();
    }
    prepare_(w);
    if (w.series.empty()) continue;  // nothing ran (-p of an idle process): nothing to send
    bool sent = false;
    int tries = 0;
    double backoff_s = 1;
    while (!sent && tries < attempts_) {
      sent = try_once(w);
      ++tries;
      std::unique_lock lock(mu_);
      if (sent || stopping_) break;
      if (tries < attempts_)
        cv_.wait_for(lock, std::chrono::duration<double>(std::min(backoff_s, max_backoff_s_)),
                     [this] { return stopping_; });
      backoff_s *= 2;
    }
    if (!sent) {
      std::lock_guard lock(mu_);
      ++counts_.dropped;
      ++failing_since_;
      say("agent: window " + span_text(w) + " dropped after " + std::to_string(tries) + " tr" +
          (tries == 1 ? "y" : "ies") + " (" + last_error_ + "); " + std::to_string(counts_.dropped) +
          " dropped so far");
    }
  }
}

}  // namespace fxprof::agent
