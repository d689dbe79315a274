// fxprof recorder internals: the tasks of a system-wide recording (`record -a`, recorder.h
// Options::system_wide).
//
// Every process on the machine is its own model::Process, as the task tracker makes them; two kinds of task
// are not programs and are shown otherwise:
//  - kernel threads (PF_KTHREAD in /proc/PID/stat, or forked by kthreadd, pid 2): each is its own pid to the
//    kernel, one track each would bury the programs. Their records are given pid 2 (kthreadd's), so they are
//    the threads of one process, named "[kernel threads]" (tasks.h attach_kernel_thread).
//  - the idle task (pid 0, "swapper/N"): never a thread; its samples are only counted (the summary's idle
//    share of the CPUs).
// The builder passes every decoded record through map() before the trackers see it. The CPU events of -a
// keep sampling a task after its EXIT record (its last microseconds in exit_mmap): such a sample is dropped
// rather than made a new thread of the ended process. Memory: one entry per live kernel thread (an exiting
// one's goes with its EXIT) and per thread that exited in the last 100 ms of records.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "recorder/host.h"
#include "recorder/records.h"

namespace fxprof::recorder {

inline constexpr uint32_t kKernelThreadsPid = 2;  // kthreadd: every kernel thread's parent

class SystemTasks {
 public:
  // Whether `pid` is a kernel thread, from its /proc/PID/stat flags (false when unreadable).
  static bool is_kernel_thread(Procfs& procfs, uint32_t pid);

  void add_kernel_thread(uint32_t tid) { kthreads_.insert(tid); }
  // Gives a kernel thread's record pid 2. Before the trackers see it: a FORK by kthreadd or a kernel thread
  // adds the new one; an exec turns a kernel thread (a user-mode helper) into a process of its own.
  void map(Record& r);
  // After the trackers saw it: an exited kernel thread's entry goes (its pid may be reused by a program).
  void after(const Record& r);

 private:
  std::unordered_set<uint32_t> kthreads_;
  std::unordered_map<uint32_t, uint64_t> exited_;         // tid -> its EXIT's time
  std::deque<std::pair<uint64_t, uint32_t>> exit_order_;  // (time, tid), oldest first
};

}  // namespace fxprof::recorder
