// fxprof recorder internals: the builder's processes and threads (builder.h's process model). Every pid gets
// a model::Process entry and every tid a model::Thread: launched and attached ones, and from the records (a
// sample's thread, an exec, a rename, a new process or thread, an exit). The context's views of threads and
// processes (tracker.h TrackerContext) are served from here (serve()), and each thread's CPU state
// (threadCPUDelta) lives beside its entry for the builder's samples and switches.
//
// It is the first tracker of the list (trackers.cpp): what it changes is told to every tracker through
// Hooks (forget a thread or a process, release the stacks before an exec or an exit, the process has ended).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/profile.h"
#include "recorder/host.h"
#include "recorder/quality.h"
#include "recorder/tracker.h"

namespace fxprof::recorder {

// A process name that tells an interpreter's processes apart: "python3 t.py", "node server.js",
// "python3 -m http.server" for `name` (the interpreter's base name) run with `args` (argv, argv[0] first);
// `name` itself for anything else, or no script (`-c CODE`, a REPL).
std::string name_with_script(const std::string& name, const std::vector<std::string>& args);

class TaskTracker final : public Tracker {
 public:
  struct CpuState {
    bool known = false, on = false;
    uint64_t since = 0, acc = 0;
    uint64_t last_sample = 0;
  };
  struct ThreadRef {
    uint32_t pid = 0;
    uint32_t proc = 0;    // index into profile.processes
    uint32_t thread = 0;  // index into that process's threads
    CpuState cpu;
    // Made by a record of its own (a sample, a rename) and no FORK of it read yet: the FORK of a thread,
    // when it is stamped before the entry began, adopts it (its fork was in a buffer read later).
    bool before_fork = false;
  };
  // What the rest of the builder does when the tasks change.
  struct Hooks {
    std::function<void(uint32_t pid)> forget_process;  // the pid got a new entry
    std::function<void(uint32_t tid)> forget_thread;   // the tid's entry ended or was replaced
    // Stacks of `pid` taken before `before_ns` are unwound now (its exec or its last thread's exit is next).
    std::function<void(uint32_t pid, uint64_t before_ns, Release why)> release;
    std::function<void(uint32_t pid)> process_ended;  // its last thread exited, after release(Exit)
    std::function<uint64_t()> lost;                   // records lost so far
  };
  TaskTracker(model::Profile& profile, Procfs& procfs, Hooks hooks);

  // Points the context's views (thread_of, for_each_thread, process_of, for_each_process) at this tracker.
  void serve(TrackerContext& c);

  void on_sample(const SampleRecord& s) override;  // its thread is registered (named from /proc if new)
  void on_mmap2(const Mmap2Record& m) override;
  void on_comm(const CommRecord& c) override;
  void on_fork(const ForkRecord& f) override;
  void on_exit(const ExitRecord& e) override;
  // At the end of a round and at an exec, the unfollowed processes are named while they still run.
  void release(uint32_t pid, uint64_t before_ns, Release why) override;

  void launched(uint32_t pid, const std::string& name, uint64_t time_ns);
  // Attach mode: the process and its main thread, named from /proc.
  void attach_process(uint32_t pid, uint64_t time_ns);
  // Attach mode: a thread running when fxprof attached; false when the builder knew it already.
  bool attach_thread(uint32_t pid, uint32_t tid, uint64_t time_ns);
  // System-wide (system_tasks.h): kernel thread `tid`, a thread of the "[kernel threads]" process (pid 2,
  // made at the first); false when known already.
  bool attach_kernel_thread(uint32_t tid, uint64_t time_ns);
  // System-wide: processes are named by their command line (argv[0]'s base name and the arguments), read
  // when attaching and at an exec while the program still runs; else argv[0]'s base name or the comm. And a
  // process that ended without a sample or marker drops its libs and threads at once (drop_if_empty).
  void set_command_lines(bool on) { command_lines_ = on; }

  // The entry of `pid` (made, named from /proc, when it has none), of thread `tid` of `pid` (likewise).
  model::Process& process_at(uint32_t pid, uint64_t t) { return profile_.processes[process(pid, t).proc]; }
  ThreadRef& thread(uint32_t pid, uint32_t tid, uint64_t t);
  ThreadRef* find_thread(uint32_t tid) {
    auto it = threads_.find(tid);
    return it == threads_.end() ? nullptr : &it->second;
  }
  // The context's views (tracker.h).
  model::Thread* thread_of(uint32_t tid);
  model::Process* process_of(uint32_t pid);
  void for_each_thread(const std::function<void(uint32_t)>& f) const {
    for (const auto& [tid, th] : threads_) f(tid);
  }
  void for_each_process(const std::function<void(uint32_t)>& f) const {
    for (const auto& [pid, pr] : procs_) f(pid);
  }

  std::vector<uint32_t>& new_pids() { return new_pids_; }
  std::vector<UnfollowedExec>& unfollowed() { return unfollowed_; }
  void launch_not_followed(uint32_t pid, const std::string& binary, const std::string& reason);

 private:
  struct ProcRef {
    uint32_t proc = 0;
    bool launch_exec_pending = false;  // launched: the first exec keeps the entry and the command's name
    // Exec'd, and no mapping of the new program reported since: an EXIT now is the kernel dropping our
    // events at a setuid/setgid or unreadable exec (it comes before the new program maps anything), however
    // short the program's life. `exec_lost`: lost() at the exec (a loss since may have taken the mappings).
    bool exec_unmapped = false;
    uint64_t exec_lost = 0;
    uint32_t live = 0;  // threads not yet exited: the unwinder forgets the pid at 0
  };

  // Whether `r` still names thread `tid`'s entry: an entry emptied since (an ended process's, at a window's
  // cut or by drop_if_empty) while a thread of it was still registered, as after an exec by another thread
  // whose old threads' exits come later, must not be written (both agents of a side-by-side run crashed so,
  // at once, writing a sample and an exit into an emptied process).
  bool held(const ThreadRef& r, uint32_t tid) const {
    return r.proc < profile_.processes.size() && r.thread < profile_.processes[r.proc].threads.size() &&
           profile_.processes[r.proc].threads[r.thread].tid == tid;
  }
  uint32_t new_process(uint32_t pid, const std::string& name, uint64_t t);
  ProcRef& process(uint32_t pid, uint64_t t);
  // The entry of thread `tid` of `pid` that a record of its own made before its FORK (stamped `t`) was
  // read, if any; it begins at the fork from now on.
  ThreadRef* adopt(uint32_t pid, uint32_t tid, uint64_t t);
  // A new thread entry (replacing any of `tid`: the trackers forget it).
  ThreadRef& add_thread(uint32_t pid, uint32_t tid, const std::string& name, uint64_t t);
  // Removes a thread entry; the trackers forget it.
  void erase_thread(std::unordered_map<uint32_t, ThreadRef>::iterator& it);
  // A thread's name from /proc, "Thread TID" when it is gone.
  std::string proc_comm(uint32_t pid, uint32_t tid);
  // The command line of `pid` as a process name (command_lines_), "" when unreadable or empty (a kernel
  // thread, a zombie) or, given `comm`, when it is not that program's (read too late: another exec).
  std::string command_line(uint32_t pid, const std::string& comm = "");
  void drop_if_empty(model::Process& p);

  model::Profile& profile_;
  Procfs& procfs_;
  Hooks hooks_;
  std::unordered_map<uint32_t, ProcRef> procs_;
  std::unordered_map<uint32_t, ThreadRef> threads_;
  std::vector<uint32_t> new_pids_;
  std::vector<UnfollowedExec> unfollowed_;
  bool command_lines_ = false;
};

}  // namespace fxprof::recorder
