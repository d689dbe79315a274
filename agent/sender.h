// fxprof agent internals: the thread that names and pushes windows (agent.h). A one-slot mailbox: the window
// loop offers each window as recorded and goes on recording the next at once; the sender names its frames
// and encodes its pprof (`prepare`: the recording is freed then), then tries it (bounded tries, backoff
// between them). At most kMaxWaiting windows wait (a slow first naming, which loads every binary's symbols,
// or a server being retried): a window offered when that many wait drops the oldest waiting one (counted).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "recorder/recorder.h"
#include "share/share.h"

namespace fxprof::agent {

struct Window {
  uint64_t number = 0;  // 1, 2...: for -v
  uint64_t from_unix_ms = 0, until_unix_ms = 0;
  recorder::Recording recording;      // as recorded: freed by `prepare`
  std::vector<share::Series> series;  // what `prepare` made of it
};

struct SenderCounts {
  uint64_t sent = 0, dropped = 0, tries = 0;
};

class Sender {
 public:
  static constexpr size_t kMaxWaiting = 3;

  // `prepare` turns a recording into series (once per window, on the sender's thread); `push` sends one
  // window (every target); `attempts` tries per window; `max_backoff_s` caps the wait between tries (the
  // window's length). Start it where the recording signals are blocked: the thread inherits the mask.
  Sender(std::function<void(Window&)> prepare, std::function<Status(const Window&)> push, int attempts,
         double max_backoff_s);
  ~Sender();  // finish(0) if not done
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  void offer(Window w);
  // Sends what is unsent, each window tried at most once more and without waiting between tries, then stops
  // the thread.
  void finish();
  SenderCounts counts();

 private:
  void loop();
  bool try_once(const Window& w);

  std::function<void(Window&)> prepare_;
  std::function<Status(const Window&)> push_;
  const int attempts_;
  const double max_backoff_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Window> waiting_;
  bool stopping_ = false;
  std::string last_error_;
  uint64_t failing_since_ = 0;  // dropped windows since the last one sent (for the "sending again" line)
  SenderCounts counts_;
  std::thread thread_;
};

}  // namespace fxprof::agent
