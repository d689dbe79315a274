#include "passes/preload.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "base/signals.h"
#include "passes/symbolicate.h"

namespace fxprof::passes {

SymbolPreloader::SymbolPreloader(symbolizer::Symbolizer& symbols) : symbols_(symbols) {
  SignalsBlocked blocked;  // the thread inherits the mask it is created with
  thread_ = std::thread([this] { run(); });
}

SymbolPreloader::~SymbolPreloader() {
  stop();
  thread_.join();
}

void SymbolPreloader::mapped(const model::Lib& lib) {
  // Pseudo-libraries ([vdso]) have no file to load; a binary without build ID is never looked up.
  if (lib.path.empty() || lib.path[0] != '/' || lib.debug_name.empty() || lib.breakpad_id.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !seen_.insert(lib.debug_name + '\n' + lib.breakpad_id).second) return;
  }
  symbolizer::KnownLib k = known_lib(lib);
  struct stat st {};
  const long long size = ::stat(k.path.c_str(), &st) == 0 ? st.st_size : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(k), size});
  }
  cv_.notify_one();
}

size_t SymbolPreloader::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stopping_) {
    stopping_ = true;
    queue_.clear();
    cv_.notify_one();
  }
  return loaded_;
}

void SymbolPreloader::run() {
  // At normal priority: at nice 19 or SCHED_IDLE a loaded machine starved it during the run, and after the
  // exit too (an unprivileged thread cannot raise its priority back), while the lookups waited for it.
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    // The largest first: the binary with the most to load (libc's DWARF, not the program's few functions)
    // is what a short program's exit would otherwise wait for.
    auto next = std::max_element(queue_.begin(), queue_.end(),
                                 [](const Queued& a, const Queued& b) { return a.size < b.size; });
    symbolizer::KnownLib k = std::move(next->lib);
    queue_.erase(next);
    lock.unlock();
    // Registered as symbolicate() registers it (the same KnownLib), so the loaded library is kept then.
    const std::string debug_name = k.debug_name, breakpad_id = k.breakpad_id;
    symbols_.add_known_lib(std::move(k));
    const bool ok = symbols_.preload(debug_name, breakpad_id).ok();
    lock.lock();
    if (ok && !stopping_) ++loaded_;
  }
}

}  // namespace fxprof::passes
