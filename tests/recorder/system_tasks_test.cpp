// `record -a`'s kernel threads and idle task (recorder/system_tasks.h): kernel threads become threads of pid
// 2, a program that reuses an exited kernel thread's pid does not, nor does a user-mode helper after its
// exec.
#include "recorder/system_tasks.h"

#include <catch2/catch.hpp>
#include <map>

using namespace fxprof;
using recorder::kKernelThreadsPid;

namespace {

class FakeProcfs final : public recorder::Procfs {
 public:
  std::map<std::string, std::string> files;
  Result<std::string> read(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return Err(path + ": none");
    return it->second;
  }
  std::vector<uint32_t> list(const std::string&) override { return {}; }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t>) override { return {}; }
};

template <typename R>
R mapped(recorder::SystemTasks& s, R r) {
  recorder::Record rec = r;
  s.map(rec);
  R out = std::get<R>(rec);
  s.after(rec);
  return out;
}

recorder::SampleRecord sample(uint32_t pid) {
  recorder::SampleRecord s;
  s.pid = s.tid = pid;
  return s;
}

}  // namespace

TEST_CASE("kernel threads are known by PF_KTHREAD in /proc/PID/stat", "[recorder][system]") {
  FakeProcfs proc;
  proc.files["/proc/40/stat"] = "40 (kworker/0:1-events (x)) I 2 0 0 0 -1 69238880 0 0";  // 0x4208060
  proc.files["/proc/41/stat"] = "41 (bash) S 1 41 41 34816 41 4194560 0 0";               // 0x400100
  CHECK(recorder::SystemTasks::is_kernel_thread(proc, 40));
  CHECK_FALSE(recorder::SystemTasks::is_kernel_thread(proc, 41));
  CHECK_FALSE(recorder::SystemTasks::is_kernel_thread(proc, 42));  // gone: unknown, not a kernel thread
  CHECK(recorder::SystemTasks::is_kernel_thread(proc, kKernelThreadsPid));
}

TEST_CASE("kernel threads' records get pid 2, until they exit or exec", "[recorder][system]") {
  recorder::SystemTasks s;
  s.add_kernel_thread(40);
  CHECK(mapped(s, sample(40)).pid == kKernelThreadsPid);
  CHECK(mapped(s, sample(40)).tid == 40);
  CHECK(mapped(s, sample(41)).pid == 41);  // a program

  // kthreadd forks a new kernel thread: it, and its records, are pid 2's.
  recorder::ForkRecord f;
  f.pid = f.tid = 50;
  f.ppid = f.ptid = kKernelThreadsPid;
  const recorder::ForkRecord fm = mapped(s, f);
  CHECK(fm.pid == kKernelThreadsPid);
  CHECK(fm.ppid == kKernelThreadsPid);
  CHECK(fm.tid == 50);
  CHECK(mapped(s, sample(50)).pid == kKernelThreadsPid);

  // It exits: a program that gets its pid later is a program.
  recorder::ExitRecord e;
  e.pid = e.tid = 50;
  e.ppid = e.ptid = kKernelThreadsPid;
  CHECK(mapped(s, e).pid == kKernelThreadsPid);
  // Its last sample after the EXIT (the CPU events keep sampling the exit path) makes no new thread.
  recorder::Record late = sample(50);
  s.map(late);
  CHECK(std::holds_alternative<recorder::OtherRecord>(late));
  recorder::ForkRecord reuse;
  reuse.pid = reuse.tid = 50;
  reuse.ppid = reuse.ptid = 1;
  CHECK(mapped(s, reuse).pid == 50);
  CHECK(mapped(s, sample(50)).pid == 50);

  // A user-mode helper (a kernel thread that execs a program) is a process of its own from its exec.
  recorder::CommRecord c;
  c.pid = c.tid = 40;
  c.exec = true;
  CHECK(mapped(s, c).pid == 40);
  CHECK(mapped(s, sample(40)).pid == 40);
}
