// The profile builder's processes and threads (builder.h): launched and attached ones, and the COMM, FORK and
// EXIT records (exec, renames, new processes and threads, exits).
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include <cstdio>

#include "base/path.h"
#include "recorder/builder.h"
#include "recorder/quality.h"

namespace fxprof::recorder {

std::string ProfileBuilder::proc_comm(uint32_t pid, uint32_t tid) {
  auto s = procfs_.read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  if (!s || s->empty()) return "Thread " + std::to_string(tid);
  std::string v = std::move(*s);
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

uint32_t ProfileBuilder::new_process(uint32_t pid, const std::string& name, uint64_t t) {
  model::Process p;
  p.pid = pid;
  p.name = name;
  p.start_ns = t;
  profile_.processes.push_back(std::move(p));
  auto idx = static_cast<uint32_t>(profile_.processes.size() - 1);
  procs_[pid] = ProcRef{idx, false};
  libs_.forget_process(pid);
  for (const std::unique_ptr<Tracker>& tr : trackers_) tr->forget_process(pid);
  new_pids_.push_back(pid);
  return idx;
}

ProfileBuilder::ThreadRef& ProfileBuilder::add_thread(uint32_t pid, uint32_t tid, const std::string& name,
                                                      uint64_t t) {
  ProcRef& pr = process(pid, t);
  model::Process& proc = profile_.processes[pr.proc];
  model::Thread th;
  th.tid = tid;
  th.name = name;
  th.is_main = tid == pid;
  th.start_ns = t;
  proc.threads.push_back(std::move(th));
  ++pr.live;
  ThreadRef ref;
  ref.pid = pid;
  ref.proc = pr.proc;
  ref.thread = static_cast<uint32_t>(proc.threads.size() - 1);
  for (const std::unique_ptr<Tracker>& tr : trackers_) tr->forget_thread(tid);
  return threads_[tid] = ref;
}

void ProfileBuilder::erase_thread(std::unordered_map<uint32_t, ThreadRef>::iterator& it) {
  const uint32_t tid = it->first;
  it = threads_.erase(it);
  for (const std::unique_ptr<Tracker>& tr : trackers_) tr->forget_thread(tid);
}

ProfileBuilder::ProcRef& ProfileBuilder::process(uint32_t pid, uint64_t t) {
  auto it = procs_.find(pid);
  if (it != procs_.end()) return it->second;
  // A process we saw no FORK for (attach-mode races): name it from /proc while it still exists.
  std::string name = proc_comm(pid, pid);
  new_process(pid, name, t);
  return procs_[pid];
}

ProfileBuilder::ThreadRef& ProfileBuilder::thread(uint32_t pid, uint32_t tid, uint64_t t) {
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid) return it->second;
  return add_thread(pid, tid, proc_comm(pid, tid), t);
}

void ProfileBuilder::on_launched(uint32_t pid, const std::string& name, uint64_t time_ns) {
  new_process(pid, name, time_ns);
  procs_[pid].launch_exec_pending = true;
  add_thread(pid, pid, name, time_ns);
}

void ProfileBuilder::on_attached(uint32_t pid, uint64_t time_ns) {
  std::string name;
  if (auto cmd = procfs_.read("/proc/" + std::to_string(pid) + "/cmdline"); cmd && !cmd->empty())
    name = base_name(cmd->c_str());
  if (name.empty()) name = proc_comm(pid, pid);
  new_process(pid, name, time_ns);
  add_thread(pid, pid, proc_comm(pid, pid), time_ns);
  for (const std::unique_ptr<Tracker>& t : trackers_) t->on_attached(pid, pid, time_ns);
  for (uint32_t tid : procfs_.list("/proc/" + std::to_string(pid) + "/task"))
    if (tid != pid) on_attached_thread(pid, tid, time_ns);
  // Executable file mappings (the libraries tracker's), as MMAP2 records would have described them.
  for (const MapsEntry& e : libs_.attach(pid, time_ns))
    for (const std::unique_ptr<Tracker>& t : trackers_) t->on_attached_mapping(pid, e, time_ns);
}

void ProfileBuilder::on_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid) return;
  add_thread(pid, tid, proc_comm(pid, tid), time_ns);
  for (const std::unique_ptr<Tracker>& t : trackers_) t->on_attached(pid, tid, time_ns);
}

void ProfileBuilder::on_comm(const CommRecord& c) {
  const uint32_t pid = c.pid, tid = c.tid;
  const std::string comm(c.comm);
  const uint64_t t = c.time;
  if (!c.exec) {
    ThreadRef& th = thread(pid, tid, t);
    profile_.processes[th.proc].threads[th.thread].name = comm;
    return;
  }
  // exec: the pid runs a new program (stacks taken before are unwound with the old one's mappings).
  resolve_pending(pid, t, Release::Exec);  // the unwinder forgets the old program next (libraries.h)
  ProcRef& pr = process(pid, t);
  model::Process* proc = &profile_.processes[pr.proc];
  bool keep_name = pr.launch_exec_pending;
  pr.launch_exec_pending = false;
  // Threads other than the exec'ing one are gone (de_thread); forget them.
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->second.pid == pid && it->first != pid)
      erase_thread(it);
    else
      ++it;
  }
  if (has_samples(*proc)) {
    proc->end_ns = t;
    for (model::Thread& th : proc->threads)
      if (!th.end_ns) th.end_ns = t;
    new_process(pid, comm, t);
    add_thread(pid, pid, comm, t);
    proc = &profile_.processes[procs_[pid].proc];
  } else {  // its libs are the old program's: the libraries tracker drops them
    if (!keep_name) proc->name = comm;
    std::erase_if(proc->threads, [&](const model::Thread& th) { return th.tid != pid; });
    if (proc->threads.empty()) {
      add_thread(pid, pid, comm, t);
    } else {
      proc->threads[0].name = comm;
      proc->threads[0].is_main = true;
      ThreadRef& ref = threads_[pid];
      ref.pid = pid;
      ref.proc = procs_[pid].proc;
      ref.thread = 0;
    }
  }
  procs_[pid].live = 1;
  procs_[pid].exec_unmapped = true;
  procs_[pid].exec_lost = lost();
  // The exec'ing thread is on a CPU right now: its CPU time counts from here.
  ThreadRef& th = threads_[pid];
  th.cpu = CpuState{true, true, t, 0, 0};
}

void ProfileBuilder::on_fork(const ForkRecord& f) {
  const uint32_t pid = f.pid, ppid = f.ppid, tid = f.tid, ptid = f.ptid;
  const uint64_t t = f.time;
  std::string parent_name;
  if (auto it = threads_.find(ptid); it != threads_.end())
    parent_name = profile_.processes[it->second.proc].threads[it->second.thread].name;
  if (pid != ppid) {
    // A new process (fork, vfork, clone without CLONE_THREAD); the libraries tracker gives it its parent's
    // mappings.
    std::string pname;
    if (auto it = procs_.find(ppid); it != procs_.end()) pname = profile_.processes[it->second.proc].name;
    if (pname.empty()) pname = parent_name.empty() ? proc_comm(pid, pid) : parent_name;
    new_process(pid, pname, t);
    add_thread(pid, tid, parent_name.empty() ? pname : parent_name, t);
  } else {
    add_thread(pid, tid, parent_name.empty() ? proc_comm(pid, tid) : parent_name, t);
  }
}

void ProfileBuilder::on_exit(const ExitRecord& e) {
  const uint32_t pid = e.pid, tid = e.tid;
  const uint64_t t = e.time;
  auto pit = procs_.find(pid);
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid) {
    model::Thread& th = profile_.processes[it->second.proc].threads[it->second.thread];
    th.end_ns = t;
    erase_thread(it);  // a reused tid later is a new thread
    if (pit != procs_.end() && pit->second.live > 0) --pit->second.live;
  }
  if (pit == procs_.end()) return;
  if (tid == pid) {
    profile_.processes[pit->second.proc].end_ns = t;
    // An EXIT while the process runs on: the kernel dropped our events at a setuid or unreadable exec. A
    // program that ended before this was read is known by its exec with nothing mapped after it.
    if (auto u = exec_not_followed(procfs_, pid)) {
      u->time_ns = t;
      unfollowed_.push_back(std::move(*u));
    } else if (pit->second.exec_unmapped && pit->second.exec_lost == lost()) {
      unfollowed_.push_back(exec_without_mappings(pid, profile_.processes[pit->second.proc].name));
      unfollowed_.back().time_ns = t;
    }
  }
  // The mappings stay until the last thread is gone (the leader may exit before its threads' last samples).
  if (pit->second.live > 0) return;
  // The process's wakes before it ended, while the unwinder knows its mappings; its JIT files, which now
  // say all they will (the pid and the file names may be reused from now on).
  release(pid, t, Release::Exit);
  libs_.process_ended(pid);
}

}  // namespace fxprof::recorder
