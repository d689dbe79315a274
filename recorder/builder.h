// fxprof recorder internals: turns perf records, in time order, into the profile model.
//
// One ProfileBuilder per recording, driven by the reading thread. Per record it does a few hash lookups
// (pid -> process entry, tid -> thread entry) and, for a sample, one stack walk (DWARF unwinding or the
// kernel's callchain) whose addresses are interned at once: no raw stack copy outlives the ring buffer slot
// it was in. The exception is a context switch's sample, which the off-CPU spans tracker keeps in its slot
// until the round's end (offcpu_spans.h): the caller keeps a round's records readable until
// resolve_pending().
//
// Process model (the task tracker's, tasks.h): every pid gets a model::Process; an exec gives the pid a new
// entry (the old one ends at that time) unless the old entry has no samples yet (a fork child that execs at
// once: the common fork+exec and posix_spawn case would otherwise show one empty track per child). Threads
// are named by their comm; renames (COMM without exec) rename them.
//
// Libraries are a tracker's (libraries.h): executable mappings (MMAP2, the /proc/PID/maps snapshot when
// attaching) become libs and the unwinder's mappings, a fork copies the parent's, an exec drops them, and
// the mapped files are kept open (kept_files.h). The sample path asks it known_code() after a loss. Its
// add_mapping() is the one place a mapped library is seen.
//
// JIT code (recorder/jit.h) is a tracker's (jit_code.h): a process's perf map is followed while it runs
// (tick()), its jitdump (announced by its MMAP2) read when its last thread exits, or at finish() for
// processes still running; the passes after the sources (passes/passes.h) name the frames, by time.
//
// Its parts: builder.cpp (dispatch, CPU samples and the unwind-this-sample service, finish) and the one
// list of trackers (trackers.cpp, in the order each record reaches them: tasks.h, processes and threads,
// first; libraries.h, with kept_files.h, second; then offcpu_spans.h, losses.h, wakes.h, jit_code.h).
// records.h decodes each record once, into a typed struct, which handle() gives every tracker of the list in
// order, then the builder's own part: CPU samples and CPU time.
//
// Adding a concern: a Tracker (tracker.h) in a file of its own, fed every typed record after the task
// tracker registered its process and thread and the libraries tracker its mappings, writing what it learns
// into the profile; and one line in make_trackers() (trackers.cpp). Nothing here changes. What it may use
// is its TrackerContext: read-only views of the threads (thread_of, for_each_thread) and processes
// (process_of, for_each_process: the entry a pid has now, with its libs), served by the task tracker, the
// builder's unwind-this-sample service (unwind_sample: a sample's stack as a CPU sample gets it, interned),
// /proc, and the facts other trackers give (out_since, counts: lost() after a loss). What it keeps per
// thread or process it drops at forget_thread() or forget_process(). Test it with synthetic records through
// feed_round (tests/recorder/synthetic.h, losses_test.cpp), or typed records given to the tracker with a
// context of fakes (offcpu_spans_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "elf/elf.h"
#include "model/profile.h"
#include "recorder/cpu_tracks.h"
#include "recorder/host.h"
#include "recorder/libraries.h"
#include "recorder/perf.h"
#include "recorder/quality.h"
#include "recorder/records.h"
#include "recorder/system_tasks.h"
#include "recorder/tasks.h"
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
  // A typed record, as handle() gives each one it decoded: a source's records that are no perf record of
  // their own (perf.data's scheduler tracepoints as switch records, perf_import.h). Its spans must stay
  // readable until resolve_pending().
  void dispatch(Record rec);
  // The trackers' release(Round): the switch-out samples of threads still out are unwound (their spans may
  // need the stacks), and the waker stacks whose waits ended: call it before the records handled since the
  // last call go away (the ring buffer space is released). Also names the processes of unfollowed() not
  // named yet.
  void resolve_pending() { release(0, 0, Release::Round); }
  // The off-CPU options (the spans tracker's, offcpu_spans.h), before any record.
  void set_off_cpu(const OffCpuConfig& c) {
    for (const std::unique_ptr<Tracker>& t : trackers_) t->set_off_cpu(c);
  }
  // Processes seen since the last call, for the waker tracer to trace.
  std::vector<uint32_t> take_new_pids() { return std::exchange(tasks_.new_pids(), {}); }
  // Every tracker's tick(): the JIT tracker reads what the perf maps of the processes with JIT code gained
  // since the last call (recorder/jit.h: new lines are stamped with the previous call's time). The
  // recorder calls it every reading round.
  void tick(uint64_t now_ns) {
    for (const std::unique_ptr<Tracker>& t : trackers_) t->tick(now_ns);
  }
  // The records come from a perf.data file (perf/data_file.h): decoded by its events' attributes, by id,
  // instead of the recorder's own two. Before any record.
  void set_layout(perf::Layout layout) { layout_ = std::move(layout); }
  // perf.data without switch records (perf_import.cpp): a sample of an event marked here (cpu-clock,
  // task-clock: they count the sampled task's own time) has as CPU delta its period, the CPU time the
  // thread used since its previous sample. Without switches the time between two samples is all the
  // builder could measure, and counts a preempted thread's waits as CPU (twice its CPU beside one busy
  // loop). Indexed by SampleRecord::event.
  void set_cpu_from_period(std::vector<bool> clock_events) { cpu_from_period_ = std::move(clock_events); }
  // A perf.data file's other events (perf_import.h): a sample of an event other than `main` (none: every
  // event) is no CPU sample; `f` gets it with its thread (processes[proc].threads[thread]) and its stack,
  // unwound as a CPU sample's. The idle task's (tid 0) and malformed records go nowhere. Before any record.
  using EventSampleFn =
      std::function<void(const SampleRecord&, size_t proc, size_t thread, model::StackId stack)>;
  void set_event_samples(std::optional<uint32_t> main, EventSampleFn f) {
    main_event_ = main;
    event_sample_ = std::move(f);
  }
  // Told each binary when a sample first goes through it (recorder::Options::on_binary_sampled).
  void on_binary_sampled(std::function<void(const model::Lib&)> f) { libs_.on_binary_sampled = std::move(f); }
  // Where each mapped file is read from instead of its path (LibraryTracker::read_from).
  void read_binaries_from(std::function<std::string(const std::string&)> f) {
    libs_.read_from = std::move(f);
  }
  // Names kernel frames and counts; `end_ns` closes nothing (open threads stay open-ended).
  void finish();
  // Continuous recording (recorder/window.h): once a window's samples left the profile, its strings, frames
  // and stacks are emptied and every tracker told (Tracker::on_model_reset), so that what one window
  // interned (every short-lived program's addresses) is not kept for the recording's life. False, and
  // nothing emptied, when ids must outlive the window: off-CPU spans and wakes hold the stacks of waits
  // still open, `--per-cpu` its tracks' labels.
  bool forget_interned();
  // `record -a`: kernel threads are grouped, the idle task counted (system_tasks.h), processes named by
  // their command lines; `per_cpu`: and a track per CPU (cpu_tracks.h). Before any record.
  void set_system_wide(bool per_cpu);
  uint64_t idle_samples() const { return idle_samples_; }  // CPU samples of the idle task (pid 0)
  // System-wide: records lost, per CPU (the buffer that overflowed).
  const std::map<uint32_t, uint64_t>& lost_by_cpu() const { return lost_by_cpu_; }
  // System-wide: the processes running at the start whose /proc/PID/maps could not be read ("NAME (pid N)").
  const std::vector<std::string>& unreadable_maps() const { return unreadable_maps_; }

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
  const std::vector<std::string>& deleted_read() const { return libs_.deleted_read(); }
  const std::vector<std::string>& deleted_unreadable() const { return libs_.deleted_unreadable(); }
  std::vector<UniqueFd> take_kept_files() { return libs_.take_kept_files(); }
  // Continuous recording (recorder/window.h): the binaries and kept descriptors of files no process of the
  // profile maps any more go (LibraryTracker::release_unmapped); the descriptors are returned.
  std::vector<UniqueFd> release_unmapped() { return libs_.release_unmapped(); }
  const LibraryTracker& libraries() const { return libs_; }
  // A launched program's executable, kept from its exec on (KeptFiles::keep_executable).
  void keep_executable(uint32_t pid) { libs_.keep_executable(pid); }
  // JIT files (perf maps, jitdumps) not used because another user owns them or others may write them
  // (recorder/jit.h jit_file_untrusted): "PATH: why" each.
  const std::vector<std::string>& jit_refused() const { return ctx_.refused_files; }
  // Perf maps whose names were not all kept (recorder/jit.h PerfMapFollower::dropped): "PATH: what" each.
  const std::vector<std::string>& jit_dropped() const { return ctx_.jit_dropped; }
  // Processes the kernel stopped profiling at an exec (setuid or unreadable binary: quality.h).
  std::vector<UnfollowedExec>& unfollowed() { return tasks_.unfollowed(); }
  // Launch mode: the kernel never reported the launched program's exec (its events were dropped before
  // they were enabled: no EXIT record either). `binary` and `reason` say what it executed and why.
  // It may also have been seen (its exec reported, then an EXIT before it mapped anything): then `binary`
  // and `reason` name it better than its comm.
  void launch_not_followed(uint32_t pid, const std::string& binary, const std::string& reason) {
    tasks_.launch_not_followed(pid, binary, reason);
  }

 private:
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
  void on_switch(const SwitchRecord& s);
  // A wakeup in the records' order (a perf.data file's sched_waking: host.h's RecordRef::waking).
  void on_waking(const RecordRef& r);
  // The builder's own part of a record, after every tracker's: CPU samples and CPU time.
  void on_record(const SampleRecord& r) { on_sample(r); }
  void on_record(const SwitchRecord& r) { on_switch(r); }
  void on_record(const LostRecord& r) { on_lost(r); }
  void on_record(const auto&) {}
  void on_lost(const LostRecord& l);

  model::Profile& profile_;
  Unwinder* unwinder_;
  Procfs& procfs_;
  EventConfig events_;
  perf::Layout layout_;  // the records' attributes: the recorder's two events, or a perf.data file's
  std::vector<bool> cpu_from_period_;  // set_cpu_from_period()
  std::vector<model::FrameId> path_;   // reused per sample
  std::vector<uint64_t> user_, kernel_, spliced_;
  std::array<uint64_t, 1024> unwound_{};
  uint64_t samples_ = 0;
  std::optional<uint32_t> main_event_;  // set_event_samples
  EventSampleFn event_sample_;
  // The context the trackers share (tracker.h), then the trackers, in the order each record reaches them
  // (trackers.cpp): the task tracker and the libraries tracker first, kept typed for what the builder asks.
  TrackerContext ctx_;
  std::vector<std::unique_ptr<Tracker>> trackers_;
  FirstTrackers first_;
  TaskTracker& tasks_ = first_.tasks;
  LibraryTracker& libs_ = first_.libs;
  // User frames at an entry point right after execve (exact instructions, already at address + 1).
  std::unordered_set<model::FrameId> entry_frames_;
  uint64_t unknown_code_samples_ = 0;
  std::unordered_set<uint32_t> unknown_code_pids_;
  std::optional<SystemTasks> system_;    // record -a
  std::optional<CpuTracks> cpu_tracks_;  // record -a --per-cpu
  uint64_t idle_samples_ = 0;
  std::map<uint32_t, uint64_t> lost_by_cpu_;
  std::vector<std::string> unreadable_maps_;
};

}  // namespace fxprof::recorder
