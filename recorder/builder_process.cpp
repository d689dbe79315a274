// The profile builder's processes and threads (builder.h): launched and attached ones, and the COMM, FORK and
// EXIT records (exec, renames, new processes and threads, exits).
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include <cstdio>

#include "base/path.h"
#include "recorder/builder.h"
#include "recorder/builder_record.h"
#include "recorder/quality.h"

namespace fxprof::recorder {

using internal::Reader;
using internal::trailer;

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
  return threads_[tid] = ref;
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

void ProfileBuilder::add_launched(uint32_t pid, const std::string& name, uint64_t time_ns) {
  new_process(pid, name, time_ns);
  procs_[pid].launch_exec_pending = true;
  add_thread(pid, pid, name, time_ns);
}

void ProfileBuilder::add_attached(uint32_t pid, uint64_t time_ns) {
  std::string name;
  if (auto cmd = procfs_.read("/proc/" + std::to_string(pid) + "/cmdline"); cmd && !cmd->empty())
    name = base_name(cmd->c_str());
  if (name.empty()) name = proc_comm(pid, pid);
  new_process(pid, name, time_ns);
  add_thread(pid, pid, proc_comm(pid, pid), time_ns);
  blocked_at_attach(pid, pid, time_ns);
  for (uint32_t tid : procfs_.list("/proc/" + std::to_string(pid) + "/task"))
    if (tid != pid) add_attached_thread(pid, tid, time_ns);
  // Executable file mappings, as MMAP2 records would have described them.
  auto maps = procfs_.read("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) return;
  size_t pos = 0;
  const std::string& m = *maps;
  while (pos < m.size()) {
    size_t eol = m.find('\n', pos);
    if (eol == std::string::npos) eol = m.size();
    std::string line = m.substr(pos, eol - pos);
    pos = eol + 1;
    unsigned long long start, end, off, ino = 0;
    unsigned maj = 0, min = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj, &min,
                    &ino, &path_at) < 7)
      continue;
    if (perms[2] != 'x' || path_at <= 0) continue;
    std::string path = static_cast<size_t>(path_at) < line.size() ? line.substr(static_cast<size_t>(path_at))
                                                                  : std::string(kAnonymousCode);  // JIT code
    if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
    uint32_t prot = PROT_EXEC | (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0);
    add_mapping(pid, start, end - start, off, prot, path, time_ns, makedev(maj, min), ino);
  }
}

void ProfileBuilder::add_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid) return;
  add_thread(pid, tid, proc_comm(pid, tid), time_ns);
  blocked_at_attach(pid, tid, time_ns);
}

bool ProfileBuilder::has_samples(const model::Process& p) const {
  for (const model::Thread& t : p.threads)
    if (!t.samples.empty()) return true;
  return false;
}

void ProfileBuilder::on_comm(const std::byte* p, size_t size, uint16_t misc) {
  Reader r(p + 8, size - 8);
  uint32_t pid, tid;
  r.u32x2(pid, tid);
  if (!r.ok()) return;
  std::string comm = r.str_before_trailer();
  uint64_t t = trailer(p, size).time;
  if (!(misc & PERF_RECORD_MISC_COMM_EXEC)) {
    ThreadRef& th = thread(pid, tid, t);
    profile_.processes[th.proc].threads[th.thread].name = comm;
    return;
  }
  // exec: the pid runs a new program (stacks taken before are unwound with the old one's mappings).
  resolve_pending(pid, t);
  if (unwinder_) unwinder_->on_exec(pid);
  ProcRef& pr = process(pid, t);
  model::Process* proc = &profile_.processes[pr.proc];
  bool keep_name = pr.launch_exec_pending;
  pr.launch_exec_pending = false;
  // Threads other than the exec'ing one are gone (de_thread); forget them.
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->second.pid == pid && it->first != pid)
      it = threads_.erase(it);
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
  } else {
    proc->libs.clear();
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
  procs_[pid].exec_lost = lost_;
  procs_[pid].jitdump.clear();  // the old image's
  procs_[pid].perf_map.reset();
  procs_[pid].anon_code.clear();
  // The exec'ing thread is on a CPU right now: its CPU time counts from here.
  ThreadRef& th = threads_[pid];
  th.cpu = CpuState{true, true, t, 0, 0};
}

void ProfileBuilder::on_fork(const std::byte* p, size_t size) {
  Reader r(p + 8, size - 8);
  uint32_t pid, ppid, tid, ptid;
  r.u32x2(pid, ppid);
  r.u32x2(tid, ptid);
  uint64_t t = r.u64();
  if (!r.ok()) return;
  std::string parent_name;
  if (auto it = threads_.find(ptid); it != threads_.end())
    parent_name = profile_.processes[it->second.proc].threads[it->second.thread].name;
  if (pid != ppid) {
    // A new process (fork, vfork, clone without CLONE_THREAD): it starts with its parent's mappings.
    if (unwinder_) unwinder_->on_fork(ppid, pid);
    std::string pname;
    std::vector<model::Lib> libs;
    std::vector<std::pair<uint64_t, uint64_t>> anon;
    if (auto it = procs_.find(ppid); it != procs_.end()) {
      pname = profile_.processes[it->second.proc].name;
      libs = profile_.processes[it->second.proc].libs;
      anon = it->second.anon_code;
    }
    if (pname.empty()) pname = parent_name.empty() ? proc_comm(pid, pid) : parent_name;
    uint32_t idx = new_process(pid, pname, t);
    profile_.processes[idx].libs = std::move(libs);
    procs_[pid].anon_code = std::move(anon);
    add_thread(pid, tid, parent_name.empty() ? pname : parent_name, t);
  } else {
    add_thread(pid, tid, parent_name.empty() ? proc_comm(pid, tid) : parent_name, t);
  }
}

void ProfileBuilder::on_exit(const std::byte* p, size_t size) {
  Reader r(p + 8, size - 8);
  uint32_t pid, ppid, tid, ptid;
  r.u32x2(pid, ppid);
  r.u32x2(tid, ptid);
  uint64_t t = r.u64();
  if (!r.ok()) return;
  auto pit = procs_.find(pid);
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid) {
    model::Thread& th = profile_.processes[it->second.proc].threads[it->second.thread];
    th.end_ns = t;
    threads_.erase(it);  // a reused tid later is a new thread
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
    } else if (pit->second.exec_unmapped && pit->second.exec_lost == lost_) {
      unfollowed_.push_back(exec_without_mappings(pid, profile_.processes[pit->second.proc].name));
      unfollowed_.back().time_ns = t;
    }
  }
  // The mappings stay until the last thread is gone (the leader may exit before its threads' last samples).
  if (pit->second.live > 0) return;
  resolve_wakes(pid, t);  // the process's wakes before it ended, while the unwinder knows its mappings
  if (unwinder_) unwinder_->on_exit(pid);
  // The JIT map files now say all they will; the pid (and the file names) may be reused from now on.
  read_jit(pid, pit->second);
}

}  // namespace fxprof::recorder
