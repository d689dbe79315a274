// fxprof recorder internals: turns perf records, in time order, into the profile model.
//
// One ProfileBuilder per recording, driven by the reading thread. Per record it does a few hash lookups
// (pid -> process entry, tid -> thread entry) and, for a sample, one stack walk (DWARF unwinding or the
// kernel's callchain) whose addresses are interned at once: no raw stack copy outlives the ring buffer slot
// it was in. The exception is a context switch's sample, which the off-CPU spans tracker keeps in its slot
// until the round's end (offcpu_spans.h): the caller keeps a round's records readable until
// resolve_pending().
//
// Process model: every pid gets a model::Process; an exec gives the pid a new entry (the old one ends at
// that time) unless the old entry has no samples yet (a fork child that execs at once: the common
// fork+exec and posix_spawn case would otherwise show one empty track per child). A fork copies the parent's
// libs. Threads are named by their comm; renames (COMM without exec) rename them.
//
// JIT code (recorder/jit.h) is a tracker's (jit_code.h): a process's perf map is followed while it runs
// (tick()), its jitdump (announced by its MMAP2) read when its last thread exits, or at finish() for
// processes still running, and finish() names the frames there, by time.
//
// Its parts: builder.cpp (dispatch, CPU samples and the unwind-this-sample service, finish),
// builder_process.cpp (processes, threads), builder_libs.cpp (mappings), kept_files.h (descriptors of mapped
// files); the trackers (trackers.cpp: offcpu_spans.h, losses.h, wakes.h, jit_code.h); records.h decodes
// each record once, into a typed struct, which handle() gives the builder's parts and then every tracker.
//
// Adding a concern: a Tracker (tracker.h) in a file of its own, fed every typed record after the builder
// registered its process and thread, writing what it learns into the profile; and one line in
// make_trackers() (trackers.cpp). Nothing here changes. What it may use of the builder is its
// TrackerContext: read-only views of the threads (thread_of, for_each_thread) and processes (process_of,
// for_each_process: the entry a pid has now), the unwind-this-sample
// service (unwind_sample: a sample's stack as a CPU sample gets it, interned), /proc, and the facts other
// trackers give (out_since, counts: lost() after a loss). What it keeps per thread or process it drops at
// forget_thread() or forget_process(). Test it with synthetic records through feed_round
// (tests/recorder/synthetic.h, losses_test.cpp), or typed records given to the tracker with a context of
// fakes (offcpu_spans_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "elf/elf.h"
#include "model/profile.h"
#include "recorder/host.h"
#include "recorder/kept_files.h"
#include "recorder/perf.h"
#include "recorder/quality.h"
#include "recorder/records.h"
#include "recorder/tracker.h"
#include "recorder/unwind/unwinder.h"
#include "recorder/waker.h"

namespace fxprof::recorder {

class ProfileBuilder final : public RecordSink {
 public:
  // `unwinder` is null in frame-pointer mode. Names, task lists, mappings of attached processes and kernel
  // function names come from `procfs` (recorder/host.h: the live /proc, or a capture's answers).
  ProfileBuilder(model::Profile& profile, Unwinder* unwinder, const EventConfig& events, Procfs& procfs);

  // The recording's input (recorder/host.h). on_records() handles each record, then resolve_pending();
  // on_end() is every tracker's on_end() (off-CPU waits still open end then), then finish().
  void on_launched(uint32_t pid, const std::string& name, uint64_t time_ns) override;
  void on_attached(uint32_t pid, uint64_t time_ns) override;  // name, threads, mappings from /proc
  void on_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) override;
  // Off-CPU wakers (waker.h): wakeups as the tracer reported them, in any order, for the trackers (the
  // spans' wake times, wakes.h); their stacks are moved out. Given before the round of records they
  // happened in: their stacks are unwound at the end of that round (resolve_pending), or before the waker's
  // process exits or execs, with the mappings the round's records described.
  void on_wakings(std::span<Waking> w) override {
    for (const std::unique_ptr<Tracker>& t : trackers_) t->on_wakings(w);
  }
  void on_records(std::span<const RecordRef> round) override;
  void on_end(uint64_t end_ns) override {
    for (const std::unique_ptr<Tracker>& t : trackers_) t->on_end(end_ns);
    finish();
  }

  // `switch_event`: the record came from a context-switches event's ring buffer (OffCpuConfig::stacks).
  // A switch-out's sample is unwound only when its span turns out to need the stack (offcpu_spans.h): the
  // record stays where it is until then, so the caller keeps every record it handled readable until it
  // calls resolve_pending(), which unwinds the stacks of threads still switched out.
  // The record is decoded once (recorder/records.h) and dispatched by type.
  void handle(const perf_event_header* h, bool switch_event = false);
  // The trackers' release(Round): the switch-out samples of threads still out are unwound (their spans may
  // need the stacks), and the waker stacks whose waits ended: call it before the records handled since the
  // last call go away (the ring buffer space is released). Also names the processes of unfollowed() not
  // named yet.
  void resolve_pending() { resolve_pending(0, 0, Release::Round); }
  // The off-CPU options (the spans tracker's, offcpu_spans.h), before any record.
  void set_off_cpu(const OffCpuConfig& c) {
    for (const std::unique_ptr<Tracker>& t : trackers_) t->set_off_cpu(c);
  }
  // Processes seen since the last call, for the waker tracer to trace.
  std::vector<uint32_t> take_new_pids() { return std::exchange(new_pids_, {}); }
  // Every tracker's tick(): the JIT tracker reads what the perf maps of the processes with JIT code gained
  // since the last call (recorder/jit.h: new lines are stamped with the previous call's time). The
  // recorder calls it every reading round.
  void tick(uint64_t now_ns) {
    for (const std::unique_ptr<Tracker>& t : trackers_) t->tick(now_ns);
  }
  // Told each lib as it enters the profile (recorder::Options::on_binary_mapped).
  std::function<void(const model::Lib&)> on_binary_mapped;
  // Names kernel frames and counts; `end_ns` closes nothing (open threads stay open-ended).
  void finish();

  uint64_t samples() const { return samples_; }
  uint64_t lost() const { return ctx_.counts.lost; }
  uint64_t throttled() const { return ctx_.counts.throttled; }
  uint64_t jit_functions() const { return ctx_.counts.jit_functions; }    // named JIT ranges read
  uint64_t switch_samples() const { return ctx_.counts.switch_samples; }  // context-switches samples read
  uint64_t switch_stacks_unwound() const { return ctx_.counts.switch_stacks_unwound; }  // of those, needed
  uint64_t off_cpu_samples() const { return ctx_.counts.off_cpu_samples; }
  uint64_t off_cpu_spans() const { return ctx_.counts.off_cpu_spans; }  // blocked or preempted spans seen
  uint64_t wakes() const { return ctx_.counts.wakes; }                  // wakeups the waker tracer reported
  uint64_t waker_stacks() const {
    return ctx_.counts.waker_stacks;
  }  // of those, with the waker's stack unwound
  // Samples taken after records were lost whose address no known mapping of their process covers (its mmap
  // or exec record was among the lost), and how many processes had them: marked "(unknown code: records
  // lost)" at the root.
  uint64_t unknown_code_samples() const { return unknown_code_samples_; }
  size_t unknown_code_processes() const { return unknown_code_pids_.size(); }
  // Binaries deleted (or replaced) while they ran: read through kept descriptors (read), or not (unreadable).
  // finish() gives their libs a read_path; the descriptors go with the recording (take_kept_files).
  const std::vector<std::string>& deleted_read() const { return kept_.deleted_read(); }
  const std::vector<std::string>& deleted_unreadable() const { return kept_.unreadable(); }
  std::vector<UniqueFd> take_kept_files() { return kept_.take(); }
  // JIT files (perf maps, jitdumps) not used because another user owns them or others may write them
  // (recorder/jit.h jit_file_untrusted): "PATH: why" each.
  const std::vector<std::string>& jit_refused() const { return ctx_.refused_files; }
  // Processes the kernel stopped profiling at an exec (setuid or unreadable binary: quality.h).
  std::vector<UnfollowedExec>& unfollowed() { return unfollowed_; }
  // Launch mode: the kernel never reported the launched program's exec (its events were dropped before
  // they were enabled: no EXIT record either). `binary` and `reason` say what it executed and why.
  // It may also have been seen (its exec reported, then an EXIT before it mapped anything): then `binary`
  // and `reason` name it better than its comm.
  void launch_not_followed(uint32_t pid, const std::string& binary, const std::string& reason) {
    for (UnfollowedExec& u : unfollowed_)
      if (u.pid == pid && u.reason.empty()) {
        u.binary = binary;
        u.reason = reason;
        return;
      }
    auto it = procs_.find(pid);
    if (it != procs_.end() && it->second.launch_exec_pending) unfollowed_.push_back({pid, binary, reason});
  }

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
    // Exec'd, and no mapping of the new program reported since: an EXIT now is the kernel dropping our
    // events at a setuid/setgid or unreadable exec (it comes before the new program maps anything), however
    // short the program's life. `exec_lost`: lost() at the exec (a loss since may have taken the mappings).
    bool exec_unmapped = false;
    uint64_t exec_lost = 0;
    uint32_t live = 0;  // threads not yet exited: the unwinder forgets the pid at 0
    // Executable memory without a file (JIT code), [start, end): known code for the lost-records check.
    std::vector<std::pair<uint64_t, uint64_t>> anon_code;
  };

  uint32_t new_process(uint32_t pid, const std::string& name, uint64_t t);
  ProcRef& process(uint32_t pid, uint64_t t);
  ThreadRef& thread(uint32_t pid, uint32_t tid, uint64_t t);
  // A new thread entry (replacing any of `tid`: the trackers forget it).
  ThreadRef& add_thread(uint32_t pid, uint32_t tid, const std::string& name, uint64_t t);
  // Removes a thread entry; the trackers forget it.
  void erase_thread(std::unordered_map<uint32_t, ThreadRef>::iterator& it);
  // An executable mapping; `prot` (PROT_* bits) picks the ELF segment the kernel mapped there. `dev`/`ino`
  // (MMAP2, /proc/PID/maps; 0 when unknown) identify the mapped file (KeptFiles::keep).
  void add_mapping(uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                   const std::string& path, uint64_t t, uint64_t dev = 0, uint64_t ino = 0);
  const elf::Identity* elf_for(const std::string& path);

  void on_sample(const SampleRecord& s);
  // The unwind-this-sample service (TrackerContext::unwind_sample): the sample's stack, interned; none if
  // the record is malformed.
  std::optional<model::StackId> stack_of(const SampleRecord& s);
  // Unwinds a sample into path_ (root first; "(stack truncated)" first if the copy cut it short). False if
  // the record is malformed.
  bool sample_path(const SampleRecord& s);
  // sample_path's parts: the callchain split into user_ and kernel_, and the DWARF walk spliced into user_
  // (true when the stack copy cut it short).
  void split_callchain(const SampleRecord& s);
  bool unwind_user(const SampleRecord& s);
  // Every tracker's release(): stacks of `pid` before `before_ns` (pid 0: of the round) are unwound now.
  void release(uint32_t pid, uint64_t before_ns, Release why) {
    for (const std::unique_ptr<Tracker>& t : trackers_) t->release(pid, before_ns, why);
  }
  // release(), then the unfollowed processes are named while they still run (at the end of a round, and
  // at an exec of `pid` at `before_ns`).
  void resolve_pending(uint32_t pid, uint64_t before_ns, Release why);
  void on_mmap2(const Mmap2Record& m);
  void on_comm(const CommRecord& c);
  void on_fork(const ForkRecord& f);
  void on_exit(const ExitRecord& e);
  void on_switch(const SwitchRecord& s);
  void on_record(const OtherRecord&) {}
  void on_record(const SampleRecord& r) { on_sample(r); }
  void on_record(const Mmap2Record& r) { on_mmap2(r); }
  void on_record(const CommRecord& r) { on_comm(r); }
  void on_record(const ForkRecord& r) { on_fork(r); }
  void on_record(const ExitRecord& r) { on_exit(r); }
  void on_record(const SwitchRecord& r) { on_switch(r); }
  void on_record(const LostRecord&) {}      // the trackers' (losses.h)
  void on_record(const ThrottleRecord&) {}  // the trackers' (losses.h)

  // A thread's name from /proc, "Thread TID" when it is gone.
  std::string proc_comm(uint32_t pid, uint32_t tid);

  model::Profile& profile_;
  Unwinder* unwinder_;
  Procfs& procfs_;
  EventConfig events_;
  RecordLayout layout_;
  std::unordered_map<uint32_t, ProcRef> procs_;
  std::unordered_map<uint32_t, ThreadRef> threads_;
  // The recording's opened binaries: the unwinder's table (each binary opened and parsed once), or, in
  // frame-pointer mode, one of the builder's own.
  Binaries own_binaries_;
  Binaries* binaries_;
  KeptFiles kept_;                    // descriptors of the mapped files (kept_files.h)
  std::vector<model::FrameId> path_;  // reused per sample
  std::vector<uint64_t> user_, kernel_, spliced_;
  std::array<uint64_t, 1024> unwound_{};
  uint64_t samples_ = 0;
  // The trackers (tracker.h): each record reaches them after the builder's own parts.
  TrackerContext ctx_;
  std::vector<std::unique_ptr<Tracker>> trackers_;
  std::vector<uint32_t> new_pids_;
  std::vector<UnfollowedExec> unfollowed_;
  // After a loss: is `ip` inside an executable mapping of `pid` we know of?
  bool known_code(uint32_t pid, uint64_t ip) const;
  uint64_t unknown_code_samples_ = 0;
  std::unordered_set<uint32_t> unknown_code_pids_;
};

}  // namespace fxprof::recorder
