// The profile builder's core (builder.h): records dispatched by type, CPU samples and the stacks they
// unwind, CPU time, the launched and attached processes handed on, and finish().
#include "recorder/builder.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "model/symbols.h"
#include "recorder/interrupted.h"
#include "recorder/kallsyms.h"
#include "recorder/offcpu.h"
#include "recorder/own_frames.h"
#include "recorder/unwind/splice.h"

namespace fxprof::recorder {

ProfileBuilder::ProfileBuilder(model::Profile& profile, Unwinder* unwinder, const EventConfig& events,
                               Procfs& procfs)
    : profile_(profile),
      unwinder_(unwinder),
      procfs_(procfs),
      events_(events),
      layout_(RecordLayout::of(events).attrs()),
      ctx_{profile,
           procfs,
           {},  // the views: the task tracker's (make_trackers)
           {},
           {},
           {},
           [this](const SampleRecord& s) { return stack_of(s); },
           [](uint32_t) { return std::optional<uint64_t>(); },  // until the spans tracker gives it
           unwinder,
           false,
           {}},
      first_(make_trackers(ctx_, trackers_)) {
  path_.reserve(2048);
  user_.reserve(1024);
  kernel_.reserve(256);
}

void ProfileBuilder::on_records(std::span<const RecordRef> round) {
  for (const RecordRef& r : round) {
    if (r.waking)
      on_waking(r);
    else if (r.typed)
      dispatch(*r.typed);
    else
      handle(r.h, r.switch_event);
  }
  resolve_pending();  // before the records it points into are released
}

// A perf.data file's sched_waking sample was taken in the waker, at its wake: its user stack (the callchain's
// user part, or unwound from the copied stack) is the waker's stack, as the eBPF tracer's copy gives it at a
// futex wake (no kernel part), and its RDI, when the file has registers, the futex word it woke (the eBPF
// tracer's `uaddr`; a lock's address is kept only for a futex wait's wake, wakes.cpp).
void ProfileBuilder::on_waking(const RecordRef& r) {
  model::StackId stack = model::kNoStack;
  if (r.h) {
    const Record rec = decode(r.h, layout_, false);
    if (const auto* s = std::get_if<SampleRecord>(&rec); s && sample_path(*s)) {
      if (s->has_regs) r.waking->uaddr = s->di;
      while (!path_.empty() && profile_.frames.get(path_.back()).kind == model::FrameKind::Kernel)
        path_.pop_back();
      if (!path_.empty()) stack = profile_.stacks.intern_path(path_);
    }
  }
  for (const std::unique_ptr<Tracker>& t : trackers_) t->on_waking(*r.waking, stack);
}

namespace {

// Each tracker's hook for a record of type R.
void to_tracker(Tracker& t, const OtherRecord&) { (void)t; }
void to_tracker(Tracker& t, const perf::ReadRecord&) { (void)t; }  // `stat`'s, not a recording's
void to_tracker(Tracker& t, const SampleRecord& r) { t.on_sample(r); }
void to_tracker(Tracker& t, const Mmap2Record& r) { t.on_mmap2(r); }
void to_tracker(Tracker& t, const CommRecord& r) { t.on_comm(r); }
void to_tracker(Tracker& t, const ForkRecord& r) { t.on_fork(r); }
void to_tracker(Tracker& t, const ExitRecord& r) { t.on_exit(r); }
void to_tracker(Tracker& t, const SwitchRecord& r) { t.on_switch(r); }
void to_tracker(Tracker& t, const LostRecord& r) { t.on_lost(r); }
void to_tracker(Tracker& t, const ThrottleRecord& r) { t.on_throttle(r); }

}  // namespace

void ProfileBuilder::handle(const perf_event_header* h, bool switch_event) {
  dispatch(decode(h, layout_, switch_event));
}

void ProfileBuilder::dispatch(Record rec) {
  if (system_) system_->map(rec);  // kernel threads become pid 2's (system_tasks.h)
  std::visit(
      [this](const auto& r) {
        for (const std::unique_ptr<Tracker>& t : trackers_) to_tracker(*t, r);
        on_record(r);
      },
      rec);
  if (system_) system_->after(rec);
}

void ProfileBuilder::set_system_wide(bool per_cpu) {
  system_.emplace();
  if (per_cpu) cpu_tracks_.emplace();
  tasks_.set_command_lines(true);
}

void ProfileBuilder::on_lost(const LostRecord& l) {
  if (system_) lost_by_cpu_[l.cpu] += l.lost;
}

void ProfileBuilder::split_callchain(const SampleRecord& s) {
  user_.clear();
  kernel_.clear();
  uint64_t context = 0;
  for (size_t i = 0; i < s.chain_size(); ++i) {
    const uint64_t a = s.chain_at(i);
    if (a >= kContextMax) {
      context = a;
      continue;
    }
    if (context == static_cast<uint64_t>(PERF_CONTEXT_KERNEL))
      kernel_.push_back(a);
    else if (context == static_cast<uint64_t>(PERF_CONTEXT_USER) && a != 0 && user_.size() < 1024)
      user_.push_back(a);
  }
}

bool ProfileBuilder::unwind_user(const SampleRecord& s) {
  if (!events_.dwarf || !s.unwindable || !unwinder_) return false;
  const UserRegs regs = decode_user_regs(std::span<const uint64_t>(s.regs.data(), s.n_regs));
  const UnwindResult u = unwinder_->unwind(s.pid, regs, s.stack, unwound_);
  if (u.count == 0) return false;
  const bool truncated =
      splice_fp_chain(std::span<const uint64_t>(unwound_.data(), u.count), u.end, user_, spliced_);
  user_.swap(spliced_);
  return truncated;
}

bool ProfileBuilder::sample_path(const SampleRecord& s) {
  if (!s.ok) return false;
  split_callchain(s);
  const bool truncated = unwind_user(s);
  path_.clear();
  // Records were lost: a sample in code none of the process's known mappings covers ran code whose mmap or
  // exec record was lost (a child may be taken for its parent). Marked, counted, never guessed.
  if (lost() > 0 && !s.switch_event && !user_.empty() && !libs_.known_code(s.pid, user_.front())) {
    path_.push_back(profile_.label_frame(kRecordsLostLabel));
    ++unknown_code_samples_;
    unknown_code_pids_.insert(s.pid);
  }
  if (!kernel_.empty() && !user_.empty() && libs_.is_entry_point(s.pid, user_.front())) {
    // Right after execve, at the new program's first instruction: exact (no return address, no caller).
    // Stored at address + 1, as interrupted instructions are (interrupted.h), for every reader's - 1.
    libs_.sampled(s.pid, user_.front());
    path_.push_back(profile_.native_frame(user_.front() + 1));
    entry_frames_.insert(path_.back());
    user_.clear();
  } else if (truncated) {
    path_.push_back(profile_.label_frame("(stack truncated)"));
  }
  for (auto it = user_.rbegin(); it != user_.rend(); ++it) {
    const size_t frames = profile_.frames.size();
    path_.push_back(profile_.native_frame(*it));
    // An address new to the profile: its binary may be one no sample used yet (its symbols are loaded then).
    if (profile_.frames.size() != frames) libs_.sampled(s.pid, *it);
  }
  for (auto it = kernel_.rbegin(); it != kernel_.rend(); ++it) path_.push_back(profile_.kernel_frame(*it));
  return true;
}

std::optional<model::StackId> ProfileBuilder::stack_of(const SampleRecord& s) {
  if (!sample_path(s)) return std::nullopt;
  return profile_.stacks.intern_path(path_);
}

void ProfileBuilder::on_sample(const SampleRecord& smp) {
  const uint32_t tid = smp.tid;
  const uint64_t time = smp.time;
  if (event_sample_ && smp.event != main_event_) {  // another event's (set_event_samples)
    const TaskTracker::ThreadRef* th = tid ? tasks_.find_thread(tid) : nullptr;
    if (th)
      if (const std::optional<model::StackId> stack = stack_of(smp))
        event_sample_(smp, th->proc, th->thread, *stack);
    if (!smp.switch_event) return;  // a switch-out's is the off-CPU spans tracker's too
  }
  if (tid == 0) {  // the idle task (swapper): counted, never a thread
    if (smp.switch_event) return;
    ++idle_samples_;
    if (cpu_tracks_) cpu_tracks_->add_idle(profile_, smp.cpu, time);
    return;
  }

  if (smp.switch_event) return;  // a switch-out's: the off-CPU spans tracker's (offcpu_spans.h)
  TaskTracker::ThreadRef& th = *tasks_.find_thread(tid);  // registered by the task tracker
  TaskTracker::CpuState& c = th.cpu;
  int64_t delta = -1;
  if (c.known) {
    if (c.on && time > c.since) c.acc += time - c.since;
    delta = static_cast<int64_t>(c.acc);
  }
  if (c.known && c.last_sample == time && time != 0) return;  // duplicate
  if (smp.event < cpu_from_period_.size() && cpu_from_period_[smp.event] && smp.period)
    delta = static_cast<int64_t>(std::min<uint64_t>(smp.period, INT64_MAX));
  const std::optional<model::StackId> stack = stack_of(smp);
  if (!stack) return;
  c.known = true;
  c.on = true;
  c.since = time;
  c.acc = 0;
  c.last_sample = time;

  model::Sample s;
  s.time_ns = time;
  s.stack = *stack;
  s.cpu_delta_ns = model::saturate_cpu_delta(delta);
  profile_.processes[th.proc].threads[th.thread].samples.push_back(s);
  ++samples_;
  if (cpu_tracks_) cpu_tracks_->add(profile_, smp.cpu, time, th.proc, th.thread, path_);
}

// A switch record: the thread's CPU time (threadCPUDelta) stops or starts; the off-CPU spans are the
// tracker's (offcpu_spans.h).
void ProfileBuilder::on_switch(const SwitchRecord& sw) {
  TaskTracker::ThreadRef* th = tasks_.find_thread(sw.tid);
  if (!th) return;
  TaskTracker::CpuState& c = th->cpu;
  if (sw.out) {
    if (c.on && sw.time > c.since) c.acc += sw.time - c.since;
    c.on = false;
    c.known = true;
  } else {
    c.on = true;
    c.known = true;
    c.since = sw.time;
  }
}

void ProfileBuilder::on_launched(uint32_t pid, const std::string& name, uint64_t time_ns) {
  tasks_.launched(pid, name, time_ns);
}

void ProfileBuilder::on_attached(uint32_t pid, uint64_t time_ns) {
  if (system_ && SystemTasks::is_kernel_thread(procfs_, pid)) {  // one of "[kernel threads]"
    system_->add_kernel_thread(pid);
    if (tasks_.attach_kernel_thread(pid, time_ns))
      for (const std::unique_ptr<Tracker>& t : trackers_) t->on_attached(kKernelThreadsPid, pid, time_ns);
    return;
  }
  tasks_.attach_process(pid, time_ns);
  for (const std::unique_ptr<Tracker>& t : trackers_) t->on_attached(pid, pid, time_ns);
  for (uint32_t tid : procfs_.list("/proc/" + std::to_string(pid) + "/task"))
    if (tid != pid) on_attached_thread(pid, tid, time_ns);
  // Executable file mappings (the libraries tracker's), as MMAP2 records would have described them.
  bool readable = true;
  for (const MapsEntry& e : libs_.attach(pid, time_ns, &readable))
    for (const std::unique_ptr<Tracker>& t : trackers_) t->on_attached_mapping(pid, e, time_ns);
  // A process gone meanwhile has no maps to miss; one still there does (named in the data quality).
  if (!readable && system_ && procfs_.read("/proc/" + std::to_string(pid) + "/comm"))
    unreadable_maps_.push_back(tasks_.process_at(pid, time_ns).name + " (pid " + std::to_string(pid) + ")");
}

void ProfileBuilder::on_attached_thread(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  if (!tasks_.attach_thread(pid, tid, time_ns)) return;
  for (const std::unique_ptr<Tracker>& t : trackers_) t->on_attached(pid, tid, time_ns);
}

bool ProfileBuilder::forget_interned() {
  if (ctx_.off_cpu || cpu_tracks_) return false;
  profile_.strings = model::StringTable{};
  profile_.frames = model::FrameTable{};
  profile_.stacks = model::StackTable{};
  std::vector<model::Binary>().swap(profile_.binaries);
  std::unordered_map<std::string, model::BinaryId>().swap(profile_.binary_index);
  std::unordered_set<model::FrameId>().swap(entry_frames_);
  for (const std::unique_ptr<Tracker>& t : trackers_) t->on_model_reset();
  return true;
}

void ProfileBuilder::finish() {
  release(0, 0, Release::End);  // the waits still open at the end were closed (on_end): none is open now
  name_kernel_frames(profile_, procfs_);
  for (const std::unique_ptr<Tracker>& t : trackers_) t->kernel_named();  // off-CPU reasons
  mark_interrupted_frames(profile_, reason_label(BlockReason::Preempted), entry_frames_);
  mark_exec_frames(profile_, entry_frames_);
  // The libs of binaries deleted while they ran get their read_path, the off-CPU waiting counters, the
  // wakers name the off-CPU waits, the JIT files still unread are read.
  for (const std::unique_ptr<Tracker>& t : trackers_) t->finish();
  mark_heap_shim_frames(profile_);
}

}  // namespace fxprof::recorder
