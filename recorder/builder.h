// fxprof recorder internals: turns perf records, in time order, into the profile model.
//
// One ProfileBuilder per recording, driven by the reading thread. Per record it does a few hash lookups
// (pid -> process entry, tid -> thread entry) and, for a sample, one stack walk (DWARF unwinding or the
// kernel's callchain) whose addresses are interned at once: no raw stack copy outlives the ring buffer slot
// it was in.
//
// Process model: every pid gets a model::Process; an exec gives the pid a new entry (the old one ends at
// that time) unless the old entry has no samples yet (a fork child that execs at once: the common
// fork+exec and posix_spawn case would otherwise show one empty track per child). A fork copies the parent's
// libs. Threads are named by their comm; renames (COMM without exec) rename them.
//
// JIT code (recorder/jit.h): a process's perf map and jitdump (announced by its MMAP2) are read when its
// last thread exits, or at finish() for processes still running, and finish() names the frames there.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "elf/elf.h"
#include "model/profile.h"
#include "recorder/perf.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

class ProfileBuilder {
 public:
  // `unwinder` is null in frame-pointer mode.
  ProfileBuilder(model::Profile& profile, Unwinder* unwinder, const EventConfig& events);

  // Launch mode: the pid we forked; its first exec keeps this entry and `name`.
  void add_launched(uint32_t pid, const std::string& name, uint64_t time_ns);
  // Attach mode: registers the process from /proc (name, threads, executable mappings).
  void add_attached(uint32_t pid, uint64_t time_ns);
  // Attach mode: a thread found when /proc/PID/task is scanned again.
  void add_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns);

  // Timestamp of a record (sample time or sample_id_all trailer), for merging buffers.
  static uint64_t record_time(const perf_event_header* h);
  void handle(const perf_event_header* h);

  // Names kernel frames and counts; `end_ns` closes nothing (open threads stay open-ended).
  void finish();

  uint64_t samples() const { return samples_; }
  uint64_t lost() const { return lost_; }
  uint64_t throttled() const { return throttled_; }
  uint64_t jit_functions() const { return jit_functions_; }  // named JIT ranges read (all processes)

 private:
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
  };
  struct ProcRef {
    uint32_t proc = 0;
    bool launch_exec_pending = false;  // launched: the first exec keeps the entry and the command's name
    uint32_t live = 0;                 // threads not yet exited: the unwinder forgets the pid at 0
    std::string jitdump;               // the jit-PID.dump file the process mmapped ("" if none)
    bool jit_read = false;             // its JIT names were read (at exit, or at the end: read_jit)
  };

  uint32_t new_process(uint32_t pid, const std::string& name, uint64_t t);
  ProcRef& process(uint32_t pid, uint64_t t);
  ThreadRef& thread(uint32_t pid, uint32_t tid, uint64_t t);
  ThreadRef& add_thread(uint32_t pid, uint32_t tid, const std::string& name, uint64_t t);
  bool has_samples(const model::Process& p) const;
  // An executable mapping; `prot` (PROT_* bits) picks the ELF segment the kernel mapped there.
  void add_mapping(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                   const std::string& path, uint64_t t);
  const elf::Identity* elf_for(const std::string& path);
  // Reads the process's perf map and jitdump into its model::Process::jit (recorder/jit.h), once.
  void read_jit(uint32_t pid, ProcRef& pr);

  void on_sample(const std::byte* p, size_t size);
  void on_mmap2(const std::byte* p, size_t size);
  void on_comm(const std::byte* p, size_t size, uint16_t misc);
  void on_fork(const std::byte* p, size_t size);
  void on_exit(const std::byte* p, size_t size);
  void on_switch(const std::byte* p, size_t size, uint16_t misc);
  void on_lost(const std::byte* p, size_t size);

  model::Profile& profile_;
  Unwinder* unwinder_;
  EventConfig events_;
  std::unordered_map<uint32_t, ProcRef> procs_;
  std::unordered_map<uint32_t, ThreadRef> threads_;
  std::unordered_map<std::string, std::optional<elf::Identity>> elf_cache_;
  std::vector<model::FrameId> path_;  // reused per sample
  std::vector<uint64_t> user_, kernel_, spliced_;
  std::array<uint64_t, 1024> unwound_{};
  model::StringId lost_name_ = model::kNoString, lost_type_ = model::kNoString, count_key_ = model::kNoString;
  uint64_t samples_ = 0, lost_ = 0, throttled_ = 0, jit_functions_ = 0;
};

}  // namespace fxprof::recorder
