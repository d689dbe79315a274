#include "recorder/builder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "base/fd.h"
#include "base/path.h"
#include "model/symbols.h"
#include "recorder/interrupted.h"
#include "recorder/kallsyms.h"
#include "recorder/offcpu.h"
#include "recorder/own_frames.h"
#include "recorder/unwind/splice.h"

namespace fxprof::recorder {

namespace {

// Bounds-checked reader over one record's body.
class Reader {
 public:
  Reader(const std::byte* p, size_t size) : p_(p), end_(p + size) {}
  bool ok() const { return ok_; }
  uint64_t u64() {
    uint64_t v = 0;
    if (end_ - p_ < 8) {
      ok_ = false;
      return 0;
    }
    std::memcpy(&v, p_, 8);
    p_ += 8;
    return v;
  }
  void u32x2(uint32_t& a, uint32_t& b) {
    uint64_t v = u64();
    a = static_cast<uint32_t>(v);
    b = static_cast<uint32_t>(v >> 32);
  }
  std::span<const std::byte> bytes(uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) {
      ok_ = false;
      return {};
    }
    auto s = std::span<const std::byte>(p_, n);
    p_ += n;
    return s;
  }
  // A NUL-terminated string padded to 8 bytes, followed by the sample_id trailer (24 bytes: we ask for
  // TID, TIME, CPU).
  std::string str_before_trailer() {
    const std::byte* limit = end_ - std::min<ptrdiff_t>(end_ - p_, 24);
    auto* s = reinterpret_cast<const char*>(p_);
    size_t n = strnlen(s, static_cast<size_t>(limit - p_));
    return std::string(s, n);
  }
  const std::byte* pos() const { return p_; }

 private:
  const std::byte* p_;
  const std::byte* end_;
  bool ok_ = true;
};

// The sample_id_all trailer: pid/tid, time, cpu/res.
struct Trailer {
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
};
Trailer trailer(const std::byte* rec, size_t size) {
  Trailer t;
  if (size < 8 + 24) return t;
  const std::byte* p = rec + size - 24;
  std::memcpy(&t.pid, p, 4);
  std::memcpy(&t.tid, p + 4, 4);
  std::memcpy(&t.time, p + 8, 8);
  return t;
}

// Where a kept descriptor's file is read while fxprof runs (recorder and symbolizer alike).
std::string fd_path(const UniqueFd& fd) { return "/proc/self/fd/" + std::to_string(fd.get()); }

// A lib for an executable mapping [start, end) whose relative addresses are SVMA - base SVMA
// (elf::Identity::lib_offset gives `offset`).
model::Lib make_lib(uint64_t start, uint64_t end, uint64_t offset, const std::string& path,
                    const elf::Identity& elf) {
  model::Lib lib;
  lib.start = start;
  lib.end = end;
  lib.offset = offset;
  lib.path = path;
  lib.name = base_name(path);
  lib.debug_name = lib.name;
  lib.debug_path = lib.path;
  if (!elf.build_id.empty()) {
    lib.breakpad_id = model::breakpad_id_from_build_id(elf.build_id);
    lib.code_id = model::code_id_from_build_id(elf.build_id);
  }
  return lib;
}

}  // namespace

std::string ProfileBuilder::proc_comm(uint32_t pid, uint32_t tid) {
  auto s = procfs_.read("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  if (!s || s->empty()) return "Thread " + std::to_string(tid);
  std::string v = std::move(*s);
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

ProfileBuilder::ProfileBuilder(model::Profile& profile, Unwinder* unwinder, const EventConfig& events,
                               Procfs& procfs)
    : profile_(profile), unwinder_(unwinder), procfs_(procfs), events_(events) {
  path_.reserve(2048);
  user_.reserve(1024);
  kernel_.reserve(256);
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

// Attach mode: a thread that sleeps when we attach saw no switch-out; its wait counts from now, without a
// user stack (no sample was taken), under the reason its wait channel (/proc/.../wchan: the kernel function
// it sleeps in) gives.
void ProfileBuilder::blocked_at_attach(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  if (!off_.spans) return;
  const std::string task = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  auto stat = procfs_.read(task + "/stat");
  if (!stat) return;
  const size_t paren = stat->rfind(')');  // "tid (comm) S ...": the comm may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= stat->size()) return;
  const char state = (*stat)[paren + 2];
  if (state != 'S' && state != 'D') return;
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  OffState& o = it->second.off;
  if (o.out) return;
  o.out = true;
  o.out_ns = time_ns;
  o.preempted = false;
  o.have_stack = false;
  auto wchan = procfs_.read(task + "/wchan");
  std::string_view fn = wchan ? std::string_view(*wchan) : std::string_view();
  const BlockReason r = classify_kernel_frames(std::span<const std::string_view>(&fn, 1));
  o.hint = r;
}

bool ProfileBuilder::has_samples(const model::Process& p) const {
  for (const model::Thread& t : p.threads)
    if (!t.samples.empty()) return true;
  return false;
}

const elf::Identity* ProfileBuilder::elf_for(const std::string& path) {
  auto it = elf_cache_.find(path);
  if (it == elf_cache_.end()) {
    std::optional<elf::Identity> info;
    if (path == "[vdso]")
      info = elf::own_vdso();
    else if (!path.empty() && path[0] == '/')
      info = elf::read_file(path);
    it = elf_cache_.emplace(path, std::move(info)).first;
  }
  return it->second ? &*it->second : nullptr;
}

void ProfileBuilder::add_mapping(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                                 const std::string& path, uint64_t t, uint64_t dev, uint64_t ino) {
  if (path.empty() || (path[0] != '/' && path != "[vdso]")) return;  // no file to name it
  if (jitdump_pid(path) != 0) {  // a JIT runtime announcing its jitdump file: names, not code
    process(pid, t).jitdump = path;
    return;
  }
  const std::string from =
      path[0] == '/' && ino != 0 ? keep_file(pid, start, start + len, path, dev, ino) : path;
  if (unwinder_) unwinder_->on_mmap(pid, start, len, pgoff, path, prot, from);
  const elf::Identity* elf = elf_for(from);
  if (!elf) return;
  model::Process& proc = profile_.processes[process(pid, t).proc];
  for (const model::Lib& l : proc.libs)
    if (l.start == start && l.end == start + len && l.path == path)
      return;  // attach: /proc/maps and MMAP2 overlap
  proc.libs.push_back(make_lib(start, start + len, elf->lib_offset(pgoff, prot), path, *elf));
  if (from != path) proc.libs.back().read_path = from;
}

std::string ProfileBuilder::keep_file(uint32_t pid, uint64_t start, uint64_t end, const std::string& path,
                                      uint64_t dev, uint64_t ino) {
  const std::string key = std::to_string(dev) + ':' + std::to_string(ino);
  // The record's device can differ from what stat() shows through an overlay (containers): only a file on
  // the same device with another inode is taken for a replacement.
  auto same_file = [&](const struct stat& st) { return st.st_ino == ino || st.st_dev != dev; };
  // In a container the path is the container's: a host file there is another file, whatever dev and ino say
  // (an overlay shows another device).
  const bool foreign = other_mount_ns(pid);
  struct stat st {};
  const bool at_path = !foreign && ::stat(path.c_str(), &st) == 0 && same_file(st);
  if (auto it = kept_index_.find(key); it != kept_index_.end())
    return at_path ? path : fd_path(kept_[it->second].fd);
  // A descriptor per distinct binary (tens in a recording); past this many, only deleted ones are kept.
  constexpr size_t kMaxKept = 512;
  if (at_path && kept_.size() >= kMaxKept) return path;
  UniqueFd fd;
  if (at_path) {
    fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  } else {
    // The container's file through its root (any user who may trace the process), or, gone or replaced
    // since it was mapped: the mapping itself (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), or the
    // process's executable (any user who may trace it).
    if (foreign)
      fd.reset(::open(("/proc/" + std::to_string(pid) + "/root" + path).c_str(), O_RDONLY | O_CLOEXEC));
    char range[80];
    std::snprintf(range, sizeof range, "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
    if (!fd.valid()) fd.reset(::open(range, O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
      char target[4096];
      const ssize_t n = readlink(exe.c_str(), target, sizeof target - 1);
      const std::string_view link(target, n > 0 ? static_cast<size_t>(n) : 0);
      if (link == path || link == path + " (deleted)") fd.reset(::open(exe.c_str(), O_RDONLY | O_CLOEXEC));
    }
    struct stat fst {};
    if (fd.valid() && (fstat(fd.get(), &fst) != 0 || (foreign ? !same_file(fst) : fst.st_ino != ino)))
      fd.reset();
    if (!fd.valid()) {
      if (std::find(unreadable_.begin(), unreadable_.end(), path) == unreadable_.end())
        unreadable_.push_back(path);
      return path;
    }
  }
  if (!fd.valid()) return path;
  kept_index_[key] = kept_.size();
  kept_.push_back({std::move(fd), path, foreign});
  return at_path ? path : fd_path(kept_.back().fd);
}

bool ProfileBuilder::other_mount_ns(uint32_t pid) {
  // Asked at each new executable mapping (one readlink), not cached by pid: `unshare -m` changes the
  // namespace of the process that then execs the program.
  auto ns_of = [](const std::string& link) {
    char buf[64];
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  };
  static const std::string own = ns_of("/proc/self/ns/mnt");
  const std::string theirs = ns_of("/proc/" + std::to_string(pid) + "/ns/mnt");
  // Unknown (the process is gone, or not ours to read): the host's view, as before.
  return !own.empty() && !theirs.empty() && theirs != own;
}

void ProfileBuilder::read_deleted_libs() {
  // Each kept file whose path no longer leads to it: its libs are read through the descriptor from now on.
  std::unordered_map<std::string, std::string> moved;  // path -> /proc/self/fd/N
  for (const KeptFile& k : kept_) {
    if (k.foreign) continue;  // read through /proc/PID/root from the start, and not deleted
    struct stat st {
    }, fst{};
    if (::stat(k.path.c_str(), &st) == 0 && fstat(k.fd.get(), &fst) == 0 && st.st_ino == fst.st_ino &&
        st.st_dev == fst.st_dev)
      continue;
    moved[k.path] = fd_path(k.fd);
    deleted_read_.push_back(k.path);
  }
  if (moved.empty()) return;
  for (model::Process& proc : profile_.processes)
    for (model::Lib& l : proc.libs)
      if (auto it = moved.find(l.path); it != moved.end() && l.read_path.empty()) l.read_path = it->second;
}

std::vector<UniqueFd> ProfileBuilder::take_kept_files() {
  std::vector<UniqueFd> out;
  for (KeptFile& k : kept_) out.push_back(std::move(k.fd));
  kept_.clear();
  kept_index_.clear();
  return out;
}

uint64_t ProfileBuilder::record_time(const perf_event_header* h) {
  auto* p = reinterpret_cast<const std::byte*>(h);
  uint64_t t = 0;
  if (h->type == PERF_RECORD_SAMPLE) {
    if (h->size >= 32) std::memcpy(&t, p + 24, 8);  // header, ip, pid/tid, time
  } else if (h->size >= 32) {
    std::memcpy(&t, p + h->size - 16, 8);
  }
  return t;
}

void ProfileBuilder::handle(const perf_event_header* h, bool switch_event) {
  auto* p = reinterpret_cast<const std::byte*>(h);
  size_t size = h->size;
  switch (h->type) {
    case PERF_RECORD_SAMPLE:
      on_sample(p, size, switch_event);
      break;
    case PERF_RECORD_MMAP2:
      on_mmap2(p, size);
      break;
    case PERF_RECORD_COMM:
      on_comm(p, size, h->misc);
      break;
    case PERF_RECORD_FORK:
      on_fork(p, size);
      break;
    case PERF_RECORD_EXIT:
      on_exit(p, size);
      break;
    case PERF_RECORD_SWITCH:
      on_switch(p, size, h->misc);
      break;
    case PERF_RECORD_LOST:
      on_lost(p, size);
      break;
    case PERF_RECORD_THROTTLE:
      ++throttled_;
      break;
    default:
      break;
  }
}

void ProfileBuilder::on_mmap2(const std::byte* p, size_t size) {
  Reader r(p + 8, size - 8);
  uint32_t pid, tid;
  r.u32x2(pid, tid);
  uint64_t addr = r.u64(), len = r.u64(), pgoff = r.u64();
  uint32_t maj, min;
  r.u32x2(maj, min);
  const uint64_t ino = r.u64();
  r.u64();  // ino_generation
  uint32_t prot, flags;
  r.u32x2(prot, flags);
  if (!r.ok()) return;
  if (auto pr = procs_.find(pid); pr != procs_.end()) pr->second.exec_unmapped = false;
  if (!(prot & PROT_EXEC)) return;
  std::string path = r.str_before_trailer();
  if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
  if (is_anonymous_code(path)) process(pid, trailer(p, size).time).anon_code.emplace_back(addr, addr + len);
  add_mapping(pid, addr, len, pgoff, prot, path, trailer(p, size).time, makedev(maj, min), ino);
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

void ProfileBuilder::on_switch(const std::byte* p, size_t size, uint16_t misc) {
  Trailer tr = trailer(p, size);
  auto it = threads_.find(tr.tid);
  if (it == threads_.end()) return;
  CpuState& c = it->second.cpu;
  OffState& o = it->second.off;
  if (misc & PERF_RECORD_MISC_SWITCH_OUT) {
    if (c.on && tr.time > c.since) c.acc += tr.time - c.since;
    c.on = false;
    c.known = true;
    o.out = true;
    o.out_ns = tr.time;
    o.preempted = (misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
  } else {
    c.on = true;
    c.known = true;
    c.since = tr.time;
    if (o.out && off_.spans) end_off_span(it->second, tr.time);
    o.out = false;
    o.have_stack = false;  // a stack belongs to the switch-out that follows it, nothing later
    o.pending = nullptr;
  }
}

void ProfileBuilder::set_off_cpu(const OffCpuConfig& c) {
  off_ = c;
  if (!off_.spans || off_interned_) return;
  off_interned_ = true;
  if (off_.interval_ns == 0) off_.interval_ns = 1;
  pending_frame_ = profile_.label_frame("[blocked: pending]", model::Category::Idle);
  preempted_frame_ = profile_.label_frame(reason_label(BlockReason::Preempted), model::Category::Idle);
  model::MarkerSchema s;
  s.name = "OffCpu";
  s.display = {"marker-chart", "marker-table"};
  s.chart_label = "{marker.data.reason} {marker.data.lock}";
  s.tooltip_label = s.table_label = "{marker.name}: {marker.data.reason} {marker.data.lock}";
  s.fields.push_back({"reason", "Reason", "string"});
  s.fields.push_back({"lock", "Lock address", "string"});
  s.fields.push_back({"waker", "Woken by", "string"});
  s.fields.push_back({"holder", "Held by", "string"});  // recorder::add_lock_holders, once symbolicated
  profile_.meta.marker_schemas.push_back(std::move(s));
  // The waker's side of a wait (eBPF, futex wakes): an instant marker with the stack that woke it.
  model::MarkerSchema w;
  w.name = "Wakeup";
  w.display = {"marker-chart", "marker-table"};
  w.chart_label = "{marker.data.wakee}";
  w.tooltip_label = w.table_label = "Wakeup of {marker.data.wakee} {marker.data.lock}";
  w.fields.push_back({"wakee", "Woke", "string"});
  w.fields.push_back({"lock", "Lock address", "string"});
  profile_.meta.marker_schemas.push_back(std::move(w));
  wakeup_name_ = profile_.strings.intern("Wakeup");
  wakee_key_ = profile_.strings.intern("wakee");
  off_type_ = profile_.strings.intern("OffCpu");
  blocked_name_ = profile_.strings.intern("Blocked");
  preempted_name_ = profile_.strings.intern("Preempted");
  lock_name_ = profile_.strings.intern("Lock wait");
  reason_key_ = profile_.strings.intern("reason");
  lock_key_ = profile_.strings.intern("lock");
  waker_key_ = profile_.strings.intern("waker");
  pending_reason_ = profile_.strings.intern("(pending)");
  preempted_reason_ = profile_.strings.intern(reason_text(BlockReason::Preempted));
  unknown_reason_ = profile_.strings.intern("unknown (no stack)");
}

// A thread ran again after a switch-out: its blocked time becomes samples (at most one per interval of
// blocked time, spread over the span) and, above the threshold, a marker.
void ProfileBuilder::end_off_span(ThreadRef& th, uint64_t in_ns) {
  OffState& o = th.off;
  if (in_ns <= o.out_ns) return;
  const uint64_t whole = in_ns - o.out_ns;
  ++off_cpu_spans_;
  // A blocked thread woken before it ran again was runnable from its wake on: waiting for a CPU (the run
  // queue), not for what it blocked on. That part is [preempted].
  const uint32_t tid = profile_.processes[th.proc].threads[th.thread].tid;
  if (auto w = wake_times_.find(tid); w != wake_times_.end()) {
    std::deque<uint64_t>& times = w->second;
    const auto end = std::lower_bound(times.begin(), times.end(), in_ns);  // the wakes before the run
    if (!o.preempted && end != times.begin() && end[-1] > o.out_ns) {
      const uint64_t wake = end[-1];
      off_span_part(th, wake, whole);
      o.out_ns = wake;
      o.preempted = true;
    }
    times.erase(times.begin(), end);
  }
  off_span_part(th, in_ns, whole);
}

void ProfileBuilder::off_span_part(ThreadRef& th, uint64_t in_ns, uint64_t whole) {
  OffState& o = th.off;
  const uint64_t d = in_ns - o.out_ns;
  // The stack is unwound only for a span that gets a sample or a marker.
  if (o.pending) {
    if (whole >= off_.threshold_ns || (off_.stacks && o.acc + whole >= off_.interval_ns))
      resolve_stack(th);
    else
      o.pending = nullptr;
  }
  model::Thread& thread = profile_.processes[th.proc].threads[th.thread];
  const model::StackId base = o.have_stack ? o.stack : model::kNoStack;
  if (off_.stacks) {
    o.acc += d;
    const uint64_t n = o.acc / off_.interval_ns;
    if (n > 0) {
      o.acc -= n * off_.interval_ns;
      model::FrameId leaf = o.preempted ? preempted_frame_ : pending_frame_;
      if (!o.preempted && !o.have_stack && o.hint != BlockReason::Unknown)
        leaf = profile_.label_frame(reason_label(o.hint), model::Category::Idle);
      const model::StackId s = profile_.stacks.intern(base, leaf);
      for (uint64_t k = 0; k < n; ++k) {
        model::Sample smp;
        smp.time_ns = o.out_ns + d * (2 * k + 1) / (2 * n);
        smp.stack = s;
        smp.cpu_delta_ns = 0;
        thread.samples.push_back(smp);
      }
      off_cpu_samples_ += n;
    }
  }
  if (d < off_.threshold_ns) return;
  model::Marker m;
  m.name = o.preempted ? preempted_name_ : blocked_name_;
  m.start_ns = o.out_ns;
  m.end_ns = in_ns;
  m.phase = model::MarkerPhase::Interval;
  m.category = model::Category::Idle;
  m.type = off_type_;
  m.stack = base;
  model::StringId reason = o.preempted ? preempted_reason_ : off_.stacks ? pending_reason_ : unknown_reason_;
  if (!o.preempted && !o.have_stack && o.hint != BlockReason::Unknown)
    reason = profile_.strings.intern(reason_text(o.hint));
  o.hint = BlockReason::Unknown;
  m.fields.push_back({reason_key_, true, 0, reason});
  if (!o.preempted && o.have_stack && o.uaddr) {  // kept in finish() only if the wait was a futex's
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(o.uaddr));
    m.fields.push_back({lock_key_, true, 0, profile_.strings.intern(buf)});
  }
  thread.markers.push_back(std::move(m));
}

void ProfileBuilder::on_lost(const std::byte* p, size_t size) {
  Reader r(p + 8, size - 8);
  r.u64();  // id
  uint64_t lost = r.u64();
  if (!r.ok()) return;
  lost_ += lost;
  Trailer tr = trailer(p, size);
  if (lost_type_ == model::kNoString) {
    model::MarkerSchema s;
    s.name = "LostRecords";
    s.display = {"marker-chart", "marker-table", "timeline-overview"};
    s.chart_label = s.tooltip_label = s.table_label = "{marker.data.count} records lost";
    s.fields.push_back({"count", "Lost records", "integer"});
    profile_.meta.marker_schemas.push_back(std::move(s));
    lost_name_ = profile_.strings.intern("Lost records");
    lost_type_ = profile_.strings.intern("LostRecords");
    count_key_ = profile_.strings.intern("count");
  }
  model::Thread* th = nullptr;
  if (auto it = threads_.find(tr.tid); it != threads_.end() && tr.tid != 0)
    th = &profile_.processes[it->second.proc].threads[it->second.thread];
  else if (!profile_.processes.empty() && !profile_.processes[0].threads.empty())
    th = &profile_.processes[0].threads[0];
  if (!th) return;
  model::Marker m;
  m.name = lost_name_;
  m.start_ns = tr.time;
  m.phase = model::MarkerPhase::Instant;
  m.type = lost_type_;
  m.fields.push_back({count_key_, false, static_cast<double>(lost), model::kNoString});
  th->markers.push_back(std::move(m));
}

bool ProfileBuilder::sample_path(const std::byte* p, size_t size, bool switch_event, uint64_t& di) {
  Reader r(p + 8, size - 8);
  r.u64();  // ip (the callchain repeats it)
  r.u64();  // pid/tid
  r.u64();  // time
  r.u64();  // cpu
  if (events_.sample_type() & PERF_SAMPLE_PERIOD) r.u64();  // period (absent with a fixed one: -e)
  uint64_t nr = r.u64();
  if (nr > size / 8) return false;  // a corrupt count (nr * 8 would wrap to a short read)
  auto chain_bytes = r.bytes(nr * 8);
  if (!r.ok()) return false;

  user_.clear();
  kernel_.clear();
  uint64_t context = 0;
  for (uint64_t i = 0; i < nr; ++i) {
    uint64_t a;
    std::memcpy(&a, chain_bytes.data() + i * 8, 8);
    if (a >= kContextMax) {
      context = a;
      continue;
    }
    if (context == static_cast<uint64_t>(PERF_CONTEXT_KERNEL))
      kernel_.push_back(a);
    else if (context == static_cast<uint64_t>(PERF_CONTEXT_USER) && a != 0 && user_.size() < 1024)
      user_.push_back(a);
  }

  bool truncated = false;
  // Registers: the unwinder's (DWARF mode), and RDI on the context-switches event (every mode). perf writes
  // them in bit order of the event's mask; the unwinder's are picked out of it.
  std::array<uint64_t, 8> vals{};
  size_t n_vals = 0;
  di = 0;
  bool have_regs = false;
  if (events_.dwarf || switch_event) {
    const uint64_t mask = switch_event ? events_.switch_regs_mask : events_.regs_mask;
    uint64_t abi = r.u64();
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
      auto regs_bytes = r.bytes(uint64_t{static_cast<uint32_t>(__builtin_popcountll(mask))} * 8);
      if (r.ok()) {
        have_regs = true;
        size_t i = 0;
        for (uint64_t m = mask; m; m &= m - 1, ++i) {
          const uint64_t bit = m & (~m + 1);
          uint64_t v;
          std::memcpy(&v, regs_bytes.data() + i * 8, 8);
          if (bit == kPerfRegDiBit) di = v;
          if ((events_.regs_mask & bit) && n_vals < vals.size()) vals[n_vals++] = v;
        }
      }
    }
  }
  if (events_.dwarf) {
    uint64_t stack_size = r.u64();
    std::span<const std::byte> stack;
    if (stack_size) {
      stack = r.bytes(stack_size);
      uint64_t dyn = r.u64();
      if (dyn < stack.size()) stack = stack.first(dyn);
    }
    uint32_t pid = 0, tid = 0;
    std::memcpy(&pid, p + 16, 4);
    std::memcpy(&tid, p + 20, 4);
    if (r.ok() && unwinder_ && have_regs) {
      UserRegs regs = decode_user_regs(std::span<const uint64_t>(vals.data(), n_vals));
      UnwindResult u = unwinder_->unwind(pid, regs, stack, unwound_);
      if (u.count > 0) {
        truncated =
            splice_fp_chain(std::span<const uint64_t>(unwound_.data(), u.count), u.end, user_, spliced_);
        user_.swap(spliced_);
      }
    }
  }

  path_.clear();
  // Records were lost: a sample in code none of the process's known mappings covers ran code whose mmap or
  // exec record was lost (a child may be taken for its parent). Marked, counted, never guessed.
  if (lost_ > 0 && !switch_event && !user_.empty()) {
    uint32_t pid = 0;
    std::memcpy(&pid, p + 16, 4);
    if (!known_code(pid, user_.front())) {
      path_.push_back(profile_.label_frame("(unknown code: records lost)"));
      ++unknown_code_samples_;
      unknown_code_pids_.insert(pid);
    }
  }
  if (truncated) path_.push_back(profile_.label_frame("(stack truncated)"));
  for (auto it = user_.rbegin(); it != user_.rend(); ++it) path_.push_back(profile_.native_frame(*it));
  for (auto it = kernel_.rbegin(); it != kernel_.rend(); ++it) path_.push_back(profile_.kernel_frame(*it));
  return true;
}

bool ProfileBuilder::known_code(uint32_t pid, uint64_t ip) const {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return false;
  for (const model::Lib& l : profile_.processes[it->second.proc].libs)
    if (ip >= l.start && ip < l.end) return true;
  for (const auto& [start, end] : it->second.anon_code)
    if (ip >= start && ip < end) return true;
  return false;
}

void ProfileBuilder::resolve_stack(ThreadRef& th) {
  OffState& o = th.off;
  if (!o.pending) return;
  uint64_t di = 0;
  if (sample_path(o.pending, o.pending_size, true, di)) {
    o.stack = profile_.stacks.intern_path(path_);
    o.uaddr = di;
    ++switch_stacks_unwound_;
  } else {
    o.have_stack = false;
  }
  o.pending = nullptr;
}

void ProfileBuilder::resolve_pending(uint32_t pid, uint64_t before_ns) {
  for (uint32_t tid : pending_tids_)
    if (auto it = threads_.find(tid); it != threads_.end()) {
      resolve_stack(it->second);
      it->second.off.queued = false;
    }
  pending_tids_.clear();
  resolve_wakes(pid, before_ns);
  // Processes whose exec was still setting up when their EXIT was read: named while they still run.
  for (UnfollowedExec& u : unfollowed_) name_unfollowed(procfs_, u);
}

void ProfileBuilder::on_sample(const std::byte* p, size_t size, bool switch_event) {
  // Header, ip, pid/tid, time: the fixed start of every sample we ask for.
  if (size < 32) return;
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0;
  std::memcpy(&pid, p + 16, 4);
  std::memcpy(&tid, p + 20, 4);
  std::memcpy(&time, p + 24, 8);
  if (tid == 0) return;

  ThreadRef& th = thread(pid, tid, time);
  if (switch_event) {
    // A switch-out: its stack is for the span that the switch records will measure. Unwound only if the span
    // needs it (end_off_span), or at the end of the round if the thread is still out then.
    ++switch_samples_;
    OffState& o = th.off;
    if (!o.queued) pending_tids_.push_back(tid);
    o.queued = true;
    o.pending = p;
    o.pending_size = size;
    o.have_stack = true;
    o.stack = model::kNoStack;
    o.uaddr = 0;
    return;
  }
  CpuState& c = th.cpu;
  int64_t delta = -1;
  if (c.known) {
    if (c.on && time > c.since) c.acc += time - c.since;
    delta = static_cast<int64_t>(c.acc);
  }
  if (c.known && c.last_sample == time && time != 0) return;  // duplicate
  uint64_t di = 0;
  if (!sample_path(p, size, false, di)) return;
  c.known = true;
  c.on = true;
  c.since = time;
  c.acc = 0;
  c.last_sample = time;

  model::Sample s;
  s.time_ns = time;
  s.stack = profile_.stacks.intern_path(path_);
  s.cpu_delta_ns = model::saturate_cpu_delta(delta);
  profile_.processes[th.proc].threads[th.thread].samples.push_back(s);
  ++samples_;
}

void ProfileBuilder::close_off_spans(uint64_t end_ns) {
  if (!off_.spans) return;
  for (auto& [tid, th] : threads_)
    if (th.off.out && end_ns > th.off.out_ns) {
      end_off_span(th, end_ns);
      th.off.out = false;
    }
}

void ProfileBuilder::finish() {
  resolve_wakes(0, 0);  // the waits still open at the end are closed (close_off_spans): none is open now
  pending_wakes_.clear();
  read_deleted_libs();
  name_kernel_frames(profile_, procfs_);
  if (off_interned_) name_off_cpu_reasons();
  mark_interrupted_frames(profile_, reason_label(BlockReason::Preempted));
  if (off_interned_) add_waiting_counters(profile_, off_.interval_ns);
  if (off_interned_ && !wakes_.empty()) name_wakers();
  for (auto& [pid, pr] : procs_) read_jit(pid, pr);  // processes still running
  model::name_jit_frames(profile_);
  mark_heap_shim_frames(profile_);
}

void ProfileBuilder::add_wakings(std::span<Waking> w) {
  for (Waking& k : w) {
    wakes_.push_back({k.time, k.waker_pid, k.waker_tid, k.wakee_tid, k.flags, k.uaddr, model::kNoStack});
    std::deque<uint64_t>& times = wake_times_[k.wakee_tid];  // in time order, but for CPUs' races
    times.insert(std::upper_bound(times.begin(), times.end(), k.time), k.time);
    if (!k.stack.empty() && unwinder_) pending_wakes_.emplace_back(wakes_.size() - 1, std::move(k));
  }
}

// Whether the waker's stack of a wake may still be used: only a wait with a marker gets a Wakeup marker
// (name_wakers), so a wake whose wakee's span ended shorter than the marker threshold needs none (at high
// switch rates, most). Open: the wakee is still out in the span the wake ends, it may become a marker.
ProfileBuilder::WakeNeed ProfileBuilder::wake_need(const Wake& w) const {
  auto it = threads_.find(w.wakee_tid);
  if (it == threads_.end()) return WakeNeed::Yes;  // gone or not seen yet: keep it to be safe
  const ThreadRef& th = it->second;
  const model::Thread& t = profile_.processes[th.proc].threads[th.thread];
  // Markers are appended as spans end, in time order: the ones that could contain the wake are at the back.
  for (auto m = t.markers.rbegin(); m != t.markers.rend(); ++m) {
    if (m->type != off_type_) continue;
    if (m->end_ns < w.time) break;
    if (m->start_ns <= w.time) return WakeNeed::Yes;
  }
  return th.off.out && th.off.out_ns <= w.time ? WakeNeed::Open : WakeNeed::No;
}

// The waker's user stack at its futex system call, unwound like a CPU sample's (no kernel part: the tracer
// sends user registers only). The leaf is the address after the `syscall` instruction.
void ProfileBuilder::resolve_wakes(uint32_t pid, uint64_t before_ns) {
  size_t kept = 0;
  for (size_t i = 0; i < pending_wakes_.size(); ++i) {
    auto& [index, k] = pending_wakes_[i];
    const bool now = pid == 0 || (k.waker_pid == pid && k.time < before_ns);
    const WakeNeed need = wake_need(wakes_[index]);
    if (need == WakeNeed::No) continue;
    if (!now || (need == WakeNeed::Open && pid == 0)) {  // later: a later round may need it
      if (kept != i) pending_wakes_[kept] = std::move(pending_wakes_[i]);
      ++kept;
      continue;
    }
    UnwindResult u = unwinder_->unwind(k.waker_pid, k.regs, k.stack, unwound_);
    if (u.count == 0) continue;
    path_.clear();
    if (u.end != UnwindEnd::Complete) path_.push_back(profile_.label_frame("(stack truncated)"));
    for (size_t f = u.count; f-- > 0;) path_.push_back(profile_.native_frame(unwound_[f]));
    wakes_[index].stack = profile_.stacks.intern_path(path_);
    ++waker_stacks_;
  }
  pending_wakes_.resize(kept);
}

// Each off-CPU marker that is not a preemption gets the last wakeup of its thread within its span: "NAME TID"
// of the waker. A wakeup with the waker's stack also becomes a `Wakeup` marker on the waker's thread: whom
// it woke, the lock (the futex word it woke, for a `Lock wait`), and the stack that released it.
void ProfileBuilder::name_wakers() {
  std::sort(wakes_.begin(), wakes_.end(), [](const Wake& a, const Wake& b) {
    return a.wakee_tid != b.wakee_tid ? a.wakee_tid < b.wakee_tid : a.time < b.time;
  });
  // Threads by tid (a tid may be reused: the one alive at the time is meant).
  std::unordered_multimap<uint32_t, model::Thread*> by_tid;
  for (model::Process& proc : profile_.processes)
    for (model::Thread& t : proc.threads) by_tid.emplace(t.tid, &t);
  auto thread_at = [&](uint32_t tid, uint64_t time) -> model::Thread* {
    model::Thread *found = nullptr, *any = nullptr;
    for (auto [it, end] = by_tid.equal_range(tid); it != end; ++it) {
      any = it->second;
      if (it->second->start_ns <= time && (!it->second->end_ns || time <= *it->second->end_ns))
        found = it->second;
    }
    return found ? found : any;
  };
  std::vector<std::pair<model::Thread*, model::Marker>> wakeups;
  char buf[64];
  for (model::Process& proc : profile_.processes)
    for (model::Thread& t : proc.threads)
      for (model::Marker& m : t.markers) {
        if (m.type != off_type_ || m.name == preempted_name_) continue;
        // The last wakeup of this thread at or before the end of the span, if it is within the span.
        auto it = std::upper_bound(wakes_.begin(), wakes_.end(), std::make_pair(t.tid, m.end_ns),
                                   [](const std::pair<uint32_t, uint64_t>& key, const Wake& w) {
                                     return key.first != w.wakee_tid ? key.first < w.wakee_tid
                                                                     : key.second < w.time;
                                   });
        if (it == wakes_.begin()) continue;
        --it;
        if (it->wakee_tid != t.tid || it->time < m.start_ns) continue;
        model::Thread* waker = it->flags ? nullptr : thread_at(it->waker_tid, it->time);
        if (it->flags & kWakeInterrupt) {
          // The task an interrupt hit is no waker: a sleep's end is its timer, anything else an interrupt.
          const bool sleep = !m.fields.empty() && profile_.strings.get(m.fields[0].string) == "sleep";
          std::snprintf(buf, sizeof buf, "%s", sleep ? "timer" : "interrupt");
        } else if (it->flags & kWakeUntraced) {
          std::snprintf(buf, sizeof buf, "pid %u (not recorded)", it->waker_pid);
        } else {
          std::snprintf(buf, sizeof buf, "%.40s %u", waker ? waker->name.c_str() : "thread", it->waker_tid);
        }
        m.fields.push_back({waker_key_, true, 0, profile_.strings.intern(buf)});
        if (it->stack == model::kNoStack || !waker) continue;
        model::Marker w;
        w.name = wakeup_name_;
        w.start_ns = it->time;
        w.phase = model::MarkerPhase::Instant;
        w.type = wakeup_name_;
        w.stack = it->stack;
        std::snprintf(buf, sizeof buf, "%.40s %u", t.name.c_str(), t.tid);
        w.fields.push_back({wakee_key_, true, 0, profile_.strings.intern(buf)});
        if (m.name == lock_name_ && it->uaddr) {
          std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(it->uaddr));
          w.fields.push_back({lock_key_, true, 0, profile_.strings.intern(buf)});
        }
        wakeups.emplace_back(waker, std::move(w));
      }
  // Appended after the walk: a waker's markers may be the ones being walked.
  for (auto& [thread, w] : wakeups) thread->markers.push_back(std::move(w));
}

// Off-CPU samples and markers get their reason from the kernel frames of their stack, now named: once per
// distinct stack.
void ProfileBuilder::name_off_cpu_reasons() {
  std::unordered_map<model::StackId, BlockReason> reasons;
  std::vector<std::string_view> names;
  auto reason_of = [&](model::StackId base) {
    auto [it, fresh] = reasons.try_emplace(base, BlockReason::Unknown);
    if (!fresh) return it->second;
    names.clear();
    for (model::StackId s = base; s != model::kNoStack; s = profile_.stacks.prefix(s)) {
      const model::Frame& f = profile_.frames.get(profile_.stacks.frame(s));
      if (f.kind != model::FrameKind::Kernel) break;  // the kernel part is the top of the stack
      if (f.name != model::kNoString) names.push_back(profile_.strings.get(f.name));
    }
    it->second = classify_kernel_frames(names);
    return it->second;
  };
  std::unordered_map<model::StackId, model::StackId> relabeled;
  for (model::Process& proc : profile_.processes) {
    for (model::Thread& t : proc.threads) {
      for (model::Sample& smp : t.samples) {
        if (smp.stack == model::kNoStack || profile_.stacks.frame(smp.stack) != pending_frame_) continue;
        auto [it, fresh] = relabeled.try_emplace(smp.stack, model::kNoStack);
        if (fresh) {
          const model::StackId base = profile_.stacks.prefix(smp.stack);
          it->second = profile_.stacks.intern(
              base, profile_.label_frame(reason_label(reason_of(base)), model::Category::Idle));
        }
        smp.stack = it->second;
      }
      for (model::Marker& m : t.markers) {
        if (m.type != off_type_ || m.fields.empty() || m.fields[0].string != pending_reason_) continue;
        const BlockReason r = m.stack == model::kNoStack ? BlockReason::Unknown : reason_of(m.stack);
        m.fields[0].string = profile_.strings.intern(reason_text(r));
        if (r == BlockReason::Futex && m.fields.size() > 1)
          m.name = lock_name_;
        else
          m.fields.resize(1);  // an address is a lock's only in a futex wait
      }
    }
  }
}

}  // namespace fxprof::recorder
