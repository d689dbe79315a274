#include "recorder/system_tasks.h"

#include <cstdio>
#include <variant>

namespace fxprof::recorder {

bool SystemTasks::is_kernel_thread(Procfs& procfs, uint32_t pid) {
  if (pid == kKernelThreadsPid) return true;
  auto stat = procfs.read("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold ')', the last one ends it.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return false;
  char state = 0;
  long ppid = 0, pgrp = 0, session = 0, tty = 0, tpgid = 0;
  unsigned long flags = 0;
  if (std::sscanf(stat->c_str() + close + 1, " %c %ld %ld %ld %ld %ld %lu", &state, &ppid, &pgrp, &session,
                  &tty, &tpgid, &flags) != 7)
    return false;
  constexpr unsigned long kPfKthread = 0x00200000;  // include/linux/sched.h PF_KTHREAD
  return (flags & kPfKthread) != 0;
}

void SystemTasks::map(Record& r) {
  if (auto* smp = std::get_if<SampleRecord>(&r); smp && smp->tid != 0 && exited_.count(smp->tid)) {
    r = OtherRecord{};  // after its thread's EXIT: the exit path's last sample
    return;
  }
  if (auto* f = std::get_if<ForkRecord>(&r)) exited_.erase(f->tid);  // a reused tid is a new thread
  if (auto* f = std::get_if<ForkRecord>(&r);
      f && f->pid != f->ppid && (f->ppid == kKernelThreadsPid || kthreads_.count(f->ppid)))
    kthreads_.insert(f->pid);
  if (auto* c = std::get_if<CommRecord>(&r); c && c->exec && kthreads_.count(c->pid)) {
    kthreads_.erase(c->pid);  // a user-mode helper: a program from now on
    return;
  }
  std::visit(
      [this](auto& rec) {
        if constexpr (requires { rec.pid; }) {
          if (rec.pid == kKernelThreadsPid || !kthreads_.count(rec.pid)) return;
          rec.pid = kKernelThreadsPid;
          if constexpr (requires { rec.ppid; })
            if (kthreads_.count(rec.ppid)) rec.ppid = kKernelThreadsPid;
        }
      },
      r);
}

void SystemTasks::after(const Record& r) {
  auto* e = std::get_if<ExitRecord>(&r);
  if (!e) return;
  if (e->pid == kKernelThreadsPid && e->tid != kKernelThreadsPid) kthreads_.erase(e->tid);
  constexpr uint64_t kLingerNs = 100'000'000;
  while (!exit_order_.empty() && exit_order_.front().first + kLingerNs < e->time) {
    auto it = exited_.find(exit_order_.front().second);
    if (it != exited_.end() && it->second == exit_order_.front().first) exited_.erase(it);
    exit_order_.pop_front();
  }
  exited_[e->tid] = e->time;
  exit_order_.push_back({e->time, e->tid});
}

}  // namespace fxprof::recorder
