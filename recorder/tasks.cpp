// The builder's processes and threads (tasks.h): launched and attached ones, and the COMM, FORK and EXIT
// records (exec, renames, new processes and threads, exits).
#include "recorder/tasks.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/path.h"

namespace fxprof::recorder {

TaskTracker::TaskTracker(model::Profile& profile, Procfs& procfs, Hooks hooks)
    : profile_(profile), procfs_(procfs), hooks_(std::move(hooks)) {}

void TaskTracker::serve(TrackerContext& c) {
  c.thread_of = [this](uint32_t tid) { return thread_of(tid); };
  c.for_each_thread = [this](const std::function<void(uint32_t)>& f) { for_each_thread(f); };
  c.process_of = [this](uint32_t pid) { return process_of(pid); };
  c.for_each_process = [this](const std::function<void(uint32_t)>& f) { for_each_process(f); };
}

void TaskTracker::on_sample(const SampleRecord& s) {
  if (s.tid != 0) thread(s.pid, s.tid, s.time);
}

void TaskTracker::release(uint32_t, uint64_t, Release why) {
  // Processes whose exec was still setting up when their EXIT was read.
  if (why == Release::Round || why == Release::Exec)
    for (UnfollowedExec& u : unfollowed_) name_unfollowed(procfs_, u);
}

model::Thread* TaskTracker::thread_of(uint32_t tid) {
  auto it = threads_.find(tid);
  return it == threads_.end() || !held(it->second, tid)
             ? nullptr
             : &profile_.processes[it->second.proc].threads[it->second.thread];
}

model::Process* TaskTracker::process_of(uint32_t pid) {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : &profile_.processes[it->second.proc];
}

void TaskTracker::launch_not_followed(uint32_t pid, const std::string& binary, const std::string& reason) {
  for (UnfollowedExec& u : unfollowed_)
    if (u.pid == pid && u.reason.empty()) {
      u.binary = binary;
      u.reason = reason;
      return;
    }
  auto it = procs_.find(pid);
  if (it != procs_.end() && it->second.launch_exec_pending) unfollowed_.push_back({pid, binary, reason});
}

// A mapping after an exec: the process runs its new program (an EXIT now is not a dropped exec).
void TaskTracker::on_mmap2(const Mmap2Record& m) {
  if (auto pr = procs_.find(m.pid); pr != procs_.end()) pr->second.exec_unmapped = false;
}

std::string TaskTracker::proc_comm(uint32_t pid, uint32_t tid) {
  auto s = procfs_.read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  if (!s || s->empty()) return "Thread " + std::to_string(tid);
  std::string v = std::move(*s);
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

uint32_t TaskTracker::new_process(uint32_t pid, const std::string& name, uint64_t t) {
  model::Process p;
  p.pid = pid;
  p.name = name;
  p.start_ns = t;
  profile_.processes.push_back(std::move(p));
  auto idx = static_cast<uint32_t>(profile_.processes.size() - 1);
  procs_[pid] = ProcRef{idx, false};
  hooks_.forget_process(pid);
  new_pids_.push_back(pid);
  return idx;
}

TaskTracker::ThreadRef& TaskTracker::add_thread(uint32_t pid, uint32_t tid, const std::string& name,
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
  hooks_.forget_thread(tid);
  return threads_[tid] = ref;
}

void TaskTracker::erase_thread(std::unordered_map<uint32_t, ThreadRef>::iterator& it) {
  const uint32_t tid = it->first;
  it = threads_.erase(it);
  hooks_.forget_thread(tid);
}

TaskTracker::ProcRef& TaskTracker::process(uint32_t pid, uint64_t t) {
  auto it = procs_.find(pid);
  if (it != procs_.end()) return it->second;
  // A process we saw no FORK for (attach-mode races): name it from /proc while it still exists.
  std::string name = proc_comm(pid, pid);
  new_process(pid, name, t);
  return procs_[pid];
}

TaskTracker::ThreadRef& TaskTracker::thread(uint32_t pid, uint32_t tid, uint64_t t) {
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid && held(it->second, tid)) return it->second;
  ThreadRef& ref = add_thread(pid, tid, proc_comm(pid, tid), t);
  ref.before_fork = true;
  return ref;
}

// Each CPU's buffer is read in turn: a thread's rename or sample (another CPU) can be read before its FORK,
// when the round's watermark (driver.h's Round::until) did not hold the later one back (the kernel published
// the fork late). A second entry would leave the first one, with the thread's name and samples, beside an
// empty one (a program of 4 threads recorded with 5). Threads only: a new process's fork gives it its
// parent's mappings (the libraries tracker), which an entry made by its exec must not get; it stays a
// second entry.
TaskTracker::ThreadRef* TaskTracker::adopt(uint32_t pid, uint32_t tid, uint64_t t) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.before_fork || it->second.pid != pid || !held(it->second, tid))
    return nullptr;
  ThreadRef& ref = it->second;
  model::Thread& th = profile_.processes[ref.proc].threads[ref.thread];
  if (th.start_ns < t) return nullptr;  // made before this fork: an older thread of a reused tid
  th.start_ns = t;
  ref.before_fork = false;
  return &ref;
}

void TaskTracker::launched(uint32_t pid, const std::string& name, uint64_t time_ns) {
  new_process(pid, name, time_ns);
  procs_[pid].launch_exec_pending = true;
  add_thread(pid, pid, name, time_ns);
}

namespace {
// The arguments of `pid` (/proc/PID/cmdline), none when unreadable.
std::vector<std::string> read_args(Procfs& procfs, uint32_t pid) {
  std::vector<std::string> args;
  auto cmd = procfs.read("/proc/" + std::to_string(pid) + "/cmdline");
  if (!cmd) return args;
  for (size_t at = 0; at < cmd->size() && args.size() < 64;) {
    args.emplace_back(cmd->c_str() + at);
    at += args.back().size() + 1;
  }
  return args;
}
}  // namespace

std::string name_with_script(const std::string& name, const std::vector<std::string>& args) {
  static constexpr std::string_view kInterpreters[] = {"python", "node", "ruby", "perl", "php",  "lua",
                                                       "bash",   "sh",   "dash", "zsh",  "deno", "bun"};
  const bool interpreter =
      std::any_of(std::begin(kInterpreters), std::end(kInterpreters), [&](std::string_view i) {
        return name.starts_with(i) &&
               (name.size() == i.size() || (name[i.size()] >= '0' && name[i.size()] <= '9'));
      });
  if (!interpreter) return name;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-m" && i + 1 < args.size()) return name + " -m " + args[i + 1];
    if (a == "-c" || a == "-e" || a == "-p" || a == "--eval" || a == "--print" || a == "-" || a == "--")
      return name;  // code on the command line or standard input: no script to name
    if (a == "-W" || a == "-X" || a == "-r" || a == "--require") {
      ++i;  // an option's value
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    const std::string_view script = base_name(a);
    return script.empty() ? name : name + " " + std::string(script.substr(0, 80));
  }
  return name;
}

std::string TaskTracker::command_line(uint32_t pid, const std::string& comm) {
  auto cmd = procfs_.read("/proc/" + std::to_string(pid) + "/cmdline");
  if (!cmd || cmd->empty()) return "";
  std::string argv0(cmd->c_str());
  std::string name(base_name(argv0));
  // Scripts run as "python3 x.py": the comm is the interpreter's or the script's, both in the command line.
  if (!comm.empty() && name.compare(0, comm.size(), comm) != 0 && cmd->find(comm) == std::string::npos)
    return "";
  for (size_t at = argv0.size() + 1; at < cmd->size() && name.size() < 160;) {
    const std::string arg(cmd->c_str() + at);
    name += " " + arg;
    at += arg.size() + 1;
  }
  if (name.size() > 160) name = name.substr(0, 157) + "...";
  return name;
}

bool TaskTracker::attach_kernel_thread(uint32_t tid, uint64_t time_ns) {
  constexpr uint32_t kGroup = 2;  // kthreadd (system_tasks.h kKernelThreadsPid)
  if (!procs_.count(kGroup))
    profile_.processes[new_process(kGroup, "[kernel threads]", time_ns)].kernel_threads = true;
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == kGroup) return false;
  add_thread(kGroup, tid, proc_comm(tid, tid), time_ns);
  return true;
}

void TaskTracker::attach_process(uint32_t pid, uint64_t time_ns) {
  std::string name = command_lines_ ? command_line(pid) : "";
  if (name.empty())
    if (auto cmd = procfs_.read("/proc/" + std::to_string(pid) + "/cmdline"); cmd && !cmd->empty())
      name = base_name(cmd->c_str());
  if (name.empty()) name = proc_comm(pid, pid);
  new_process(pid, name, time_ns);
  add_thread(pid, pid, proc_comm(pid, pid), time_ns);
}

bool TaskTracker::attach_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid) return false;
  add_thread(pid, tid, proc_comm(pid, tid), time_ns);
  return true;
}

void TaskTracker::on_comm(const CommRecord& c) {
  const uint32_t pid = c.pid, tid = c.tid;
  const std::string comm(c.comm);
  const uint64_t t = c.time;
  if (!c.exec) {
    ThreadRef& th = thread(pid, tid, t);
    profile_.processes[th.proc].threads[th.thread].name = comm;
    return;
  }
  // exec: the pid runs a new program (stacks taken before are unwound with the old one's mappings).
  hooks_.release(pid, t, Release::Exec);  // the unwinder forgets the old program next (libraries.h)
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
  std::string name = command_lines_ ? command_line(pid, comm) : "";
  if (name.empty()) name = name_with_script(comm, read_args(procfs_, pid));
  if (has_samples(*proc)) {
    proc->end_ns = t;
    for (model::Thread& th : proc->threads)
      if (!th.end_ns) th.end_ns = t;
    new_process(pid, name, t);
    add_thread(pid, pid, comm, t);
    proc = &profile_.processes[procs_[pid].proc];
  } else {  // its libs are the old program's: the libraries tracker drops them
    if (!keep_name) proc->name = name;
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
  procs_[pid].exec_lost = hooks_.lost();
  // The exec'ing thread is on a CPU right now: its CPU time counts from here.
  ThreadRef& th = threads_[pid];
  th.cpu = CpuState{true, true, t, 0, 0};
}

void TaskTracker::on_fork(const ForkRecord& f) {
  const uint32_t pid = f.pid, ppid = f.ppid, tid = f.tid, ptid = f.ptid;
  const uint64_t t = f.time;
  std::string parent_name;
  if (auto it = threads_.find(ptid); it != threads_.end() && held(it->second, ptid))
    parent_name = profile_.processes[it->second.proc].threads[it->second.thread].name;
  if (pid != ppid) {
    // A new process (fork, vfork, clone without CLONE_THREAD); the libraries tracker gives it its parent's
    // mappings.
    std::string pname;
    if (auto it = procs_.find(ppid); it != procs_.end()) pname = profile_.processes[it->second.proc].name;
    if (pname.empty()) pname = parent_name.empty() ? proc_comm(pid, pid) : parent_name;
    new_process(pid, pname, t);
    add_thread(pid, tid, parent_name.empty() ? pname : parent_name, t);
  } else if (!adopt(pid, tid, t)) {  // adopted: its name, given after the fork, is kept
    add_thread(pid, tid, parent_name.empty() ? proc_comm(pid, tid) : parent_name, t);
  }
}

void TaskTracker::on_exit(const ExitRecord& e) {
  const uint32_t pid = e.pid, tid = e.tid;
  const uint64_t t = e.time;
  auto pit = procs_.find(pid);
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second.pid == pid) {
    if (held(it->second, tid)) profile_.processes[it->second.proc].threads[it->second.thread].end_ns = t;
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
    } else if (pit->second.exec_unmapped && pit->second.exec_lost == hooks_.lost()) {
      unfollowed_.push_back(exec_without_mappings(pid, profile_.processes[pit->second.proc].name));
      unfollowed_.back().time_ns = t;
    }
  }
  // The mappings stay until the last thread is gone (the leader may exit before its threads' last samples).
  if (pit->second.live > 0) return;
  // The process's wakes before it ended, while the unwinder knows its mappings; its JIT files, which now
  // say all they will (the pid and the file names may be reused from now on).
  hooks_.release(pid, t, Release::Exit);
  hooks_.process_ended(pid);
  if (command_lines_) drop_if_empty(profile_.processes[pit->second.proc]);
}

// -a: a process that ended without a sample or marker is no track (the recorder drops it at the end); its
// libs and threads go now, so a machine that runs thousands of short programs does not keep them all.
void TaskTracker::drop_if_empty(model::Process& p) {
  for (const model::Thread& th : p.threads)
    if (!th.samples.empty() || !th.markers.empty() || !th.allocations.empty()) return;
  std::vector<model::Lib>().swap(p.libs);
  std::vector<model::Thread>().swap(p.threads);
}

}  // namespace fxprof::recorder
