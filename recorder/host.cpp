#include "recorder/host.h"

#include <dirent.h>

#include <algorithm>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/fd.h"
#include "recorder/kallsyms.h"

namespace fxprof::recorder {

namespace {

class LiveProcfs final : public Procfs {
 public:
  Result<std::string> read(const std::string& path) override { return read_file(path); }
  std::vector<uint32_t> list(const std::string& dir) override {
    std::vector<uint32_t> out;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
          out.push_back(static_cast<uint32_t>(std::strtoul(e->d_name, nullptr, 10)));
      closedir(d);
    }
    return out;
  }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t> addrs) override {
    std::future<KernelSymbols> pending;
    {
      std::lock_guard lock(mu_);
      pending = std::move(prefetch_);
    }
    if (!pending.valid()) return read_kallsyms(addrs);
    return pending.get().names(addrs);
  }
  void prefetch_kernel_symbols() override {
    // Detached, so that a recording with no kernel frame to name (or one that failed) does not wait for it
    // at exit; a table left unused is replaced by the next recording's. The thread inherits the caller's
    // signal mask: the recording's signals stay with the recorder.
    std::packaged_task<KernelSymbols()> task([] { return KernelSymbols::read(); });
    std::future<KernelSymbols> f = task.get_future();
    try {
      std::thread(std::move(task)).detach();
    } catch (const std::system_error&) {
      return;  // no thread to spare: kernel_symbols() reads kallsyms itself at the end, as without the hint
    }
    std::lock_guard lock(mu_);
    prefetch_ = std::move(f);
  }

 private:
  std::mutex mu_;
  std::future<KernelSymbols> prefetch_;
};

}  // namespace

Procfs& live_procfs() {
  static LiveProcfs live;
  return live;
}

}  // namespace fxprof::recorder
