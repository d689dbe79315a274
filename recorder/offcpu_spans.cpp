// The off-CPU spans tracker (offcpu_spans.h): switch records time each wait, which becomes samples and
// markers; the switch-out samples' stacks are unwound only for the spans that need them.
#include "recorder/offcpu_spans.h"

#include <algorithm>
#include <cstdio>

#include "model/waits.h"

namespace fxprof::recorder {

OffCpuTracker::OffCpuTracker(TrackerContext& c) : c_(c) {
  c_.out_since = [this](uint32_t tid) -> std::optional<uint64_t> {
    auto it = threads_.find(tid);
    if (it == threads_.end() || !it->second.out) return std::nullopt;
    return it->second.out_ns;
  };
}

// Attach mode: a thread that sleeps when we attach saw no switch-out; its wait counts from now, without a
// user stack (no sample was taken), under the reason its wait channel (/proc/.../wchan: the kernel function
// it sleeps in) gives.
void OffCpuTracker::on_attached(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  if (!config_.spans) return;
  const std::string task = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  auto stat = c_.procfs.read(task + "/stat");
  if (!stat) return;
  const size_t paren = stat->rfind(')');  // "tid (comm) S ...": the comm may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= stat->size()) return;
  const char state = (*stat)[paren + 2];
  if (state != 'S' && state != 'D') return;
  if (!c_.thread_of(tid)) return;
  OffState& o = threads_[tid];
  if (o.out) return;
  o.out = true;
  o.out_ns = time_ns;
  o.preempted = false;
  o.have_stack = false;
  auto wchan = c_.procfs.read(task + "/wchan");
  std::string_view fn = wchan ? std::string_view(*wchan) : std::string_view();
  const BlockReason r = classify_kernel_frames(std::span<const std::string_view>(&fn, 1));
  o.hint = r;
}

// A switch-out: its stack is for the span that the switch records will measure. Unwound only if the span
// needs it (end_span), or at the end of the round if the thread is still out then.
void OffCpuTracker::on_sample(const SampleRecord& s) {
  if (!s.switch_event || s.tid == 0) return;
  ++c_.counts.switch_samples;
  OffState& o = threads_[s.tid];
  if (!o.queued) pending_tids_.push_back(s.tid);
  o.queued = true;
  o.pending = true;
  o.pending_sample = s;
  o.have_stack = true;
  o.stack = model::kNoStack;
  o.uaddr = 0;
}

void OffCpuTracker::on_switch(const SwitchRecord& sw) {
  if (!c_.thread_of(sw.tid)) return;
  OffState& o = threads_[sw.tid];
  if (sw.out) {
    o.out = true;
    o.out_ns = sw.time;
    o.preempted = sw.preempted;
  } else {
    if (o.out && config_.spans) end_span(sw.tid, o, sw.time);
    o.out = false;
    o.have_stack = false;  // a stack belongs to the switch-out that follows it, nothing later
    o.pending = false;
  }
}

void OffCpuTracker::on_wakings(std::span<Waking> w) {
  for (const Waking& k : w) {
    std::deque<uint64_t>& times = wake_times_[k.wakee_tid];  // in time order, but for CPUs' races
    times.insert(std::upper_bound(times.begin(), times.end(), k.time), k.time);
  }
}

void OffCpuTracker::set_off_cpu(const OffCpuConfig& config) {
  config_ = config;
  if (!config_.spans || interned_) return;
  interned_ = true;
  c_.off_cpu = true;
  if (config_.interval_ns == 0) config_.interval_ns = 1;
  model::Profile& profile = c_.profile;
  pending_frame_ = profile.label_frame("[blocked: pending]", model::Category::Idle);
  preempted_frame_ = profile.label_frame(reason_label(BlockReason::Preempted), model::Category::Idle);
  model::MarkerSchema s;
  s.name = "OffCpu";
  s.display = {"marker-chart", "marker-table"};
  s.chart_label = "{marker.data.reason} {marker.data.lock}";
  s.tooltip_label = s.table_label = "{marker.name}: {marker.data.reason} {marker.data.lock}";
  s.fields.push_back({"reason", "Reason", "string"});
  s.fields.push_back({"lock", "Lock address", "string"});
  s.fields.push_back({"waker", "Woken by", "string"});
  s.fields.push_back({"holder", "Held by", "string"});    // passes::add_lock_holders, once symbolicated
  s.fields.push_back({"waiter", "Waited in", "string"});  // likewise: the function that waited
  profile.meta.marker_schemas.push_back(std::move(s));
  // The waker's side of a wait (eBPF, futex wakes): an instant marker with the stack that woke it.
  model::MarkerSchema w;
  w.name = "Wakeup";
  w.display = {"marker-chart", "marker-table"};
  w.chart_label = "{marker.data.wakee}";
  w.tooltip_label = w.table_label = "Wakeup of {marker.data.wakee} {marker.data.lock}";
  w.fields.push_back({"wakee", "Woke", "string"});
  w.fields.push_back({"lock", "Lock address", "string"});
  profile.meta.marker_schemas.push_back(std::move(w));
  // Strings of the wakers tracker (wakes.h), interned here with its marker schema.
  profile.strings.intern("Wakeup");
  profile.strings.intern("wakee");
  off_type_ = profile.strings.intern("OffCpu");
  // The markers' names and keys (model/waits.h makes them), interned once here.
  for (std::string_view text : {"Blocked", "Preempted", "Lock wait", "reason", "lock", "waker", "(pending)",
                                "preempted", "unknown (no stack)"})
    profile.strings.intern(text);
}

// A thread ran again after a switch-out: its blocked time becomes samples (at most one per interval of
// blocked time, spread over the span) and, above the threshold, a marker.
void OffCpuTracker::end_span(uint32_t tid, OffState& o, uint64_t in_ns) {
  if (in_ns <= o.out_ns) return;
  const uint64_t whole = in_ns - o.out_ns;
  ++c_.counts.off_cpu_spans;
  // A blocked thread woken before it ran again was runnable from its wake on: waiting for a CPU (the run
  // queue), not for what it blocked on. That part is [preempted].
  if (auto w = wake_times_.find(tid); w != wake_times_.end()) {
    std::deque<uint64_t>& times = w->second;
    const auto end = std::lower_bound(times.begin(), times.end(), in_ns);  // the wakes before the run
    if (!o.preempted && end != times.begin() && end[-1] > o.out_ns) {
      const uint64_t wake = end[-1];
      span_part(tid, o, wake, whole);
      o.out_ns = wake;
      o.preempted = true;
    }
    times.erase(times.begin(), end);
  }
  span_part(tid, o, in_ns, whole);
}

void OffCpuTracker::span_part(uint32_t tid, OffState& o, uint64_t in_ns, uint64_t whole) {
  const uint64_t d = in_ns - o.out_ns;
  // The stack is unwound only for a span that gets a sample or a marker.
  if (o.pending) {
    if (whole >= config_.threshold_ns || (config_.stacks && o.acc + whole >= config_.interval_ns))
      resolve_stack(o);
    else
      o.pending = false;
  }
  model::Profile& profile = c_.profile;
  model::Thread& thread = *c_.thread_of(tid);
  const model::StackId base = o.have_stack ? o.stack : model::kNoStack;
  if (config_.stacks) {
    o.acc += d;
    const uint64_t n = o.acc / config_.interval_ns;
    if (n > 0) {
      o.acc -= n * config_.interval_ns;
      model::FrameId leaf = o.preempted ? preempted_frame_ : pending_frame_;
      if (!o.preempted && !o.have_stack && o.hint != BlockReason::Unknown)
        leaf = profile.label_frame(reason_label(o.hint), model::Category::Idle);
      const model::StackId s = profile.stacks.intern(base, leaf);
      for (uint64_t k = 0; k < n; ++k) {
        model::Sample smp;
        smp.time_ns = o.out_ns + d * (2 * k + 1) / (2 * n);
        smp.stack = s;
        smp.cpu_delta_ns = 0;
        thread.samples.push_back(smp);
      }
      c_.counts.off_cpu_samples += n;
    }
  }
  if (d < config_.threshold_ns) return;
  // The wait, typed; its marker (the blocking stack, its place among the thread's markers) made from it.
  model::Wait w;
  w.start_ns = o.out_ns;
  w.end_ns = w.wake_ns = in_ns;
  w.reason = o.preempted      ? model::WaitReason::Preempted
             : config_.stacks ? model::WaitReason::Pending
                              : model::WaitReason::NoStack;
  if (!o.preempted && !o.have_stack && o.hint != BlockReason::Unknown) w.reason = wait_reason(o.hint);
  o.hint = BlockReason::Unknown;
  if (!o.preempted && o.have_stack) w.lock = o.uaddr;  // kept by name_reasons only if the wait was a futex's
  w.marker = static_cast<uint32_t>(thread.markers.size());
  model::Marker m;
  m.start_ns = o.out_ns;
  m.end_ns = in_ns;
  m.phase = model::MarkerPhase::Interval;
  m.category = model::Category::Idle;
  m.type = off_type_;
  m.stack = base;
  thread.markers.push_back(std::move(m));
  thread.waits.push_back(w);
  model::make_wait_marker(profile, thread, w);
}

void OffCpuTracker::resolve_stack(OffState& o) {
  if (!o.pending) return;
  if (std::optional<model::StackId> stack = c_.unwind_sample(o.pending_sample)) {
    o.stack = *stack;
    o.uaddr = o.pending_sample.di;
    ++c_.counts.switch_stacks_unwound;
  } else {
    o.have_stack = false;
  }
  o.pending = false;
}

// The pending switch-out samples are unwound at the end of each round (their records are released next) and
// at an exec (the unwinder forgets the old program's mappings): every thread's, as their spans may need them.
// Not at an exit: the exiting process's threads are gone (forget_thread), the others' wait for the round.
void OffCpuTracker::release(uint32_t, uint64_t, Release why) {
  if (why != Release::Round && why != Release::Exec) return;
  for (uint32_t tid : pending_tids_)
    if (auto it = threads_.find(tid); it != threads_.end()) {
      resolve_stack(it->second);
      it->second.queued = false;
    }
  pending_tids_.clear();
}

// Threads still switched out when the recording stops (attach mode, --duration: a server blocked in accept)
// get their wait up to `end_ns`; in the builder's order of threads, as their stacks are interned.
void OffCpuTracker::on_end(uint64_t end_ns) {
  if (!config_.spans) return;
  c_.for_each_thread([&](uint32_t tid) {
    auto it = threads_.find(tid);
    if (it == threads_.end()) return;
    OffState& o = it->second;
    if (o.out && end_ns > o.out_ns) {
      end_span(tid, o, end_ns);
      o.out = false;
    }
  });
}

void OffCpuTracker::kernel_named() {
  if (interned_) name_reasons();
}

void OffCpuTracker::finish() {
  if (interned_) model::add_waiting_counters(c_.profile, config_.interval_ns);
}

// Off-CPU samples and markers get their reason from the kernel frames of their stack, now named: once per
// distinct stack.
void OffCpuTracker::name_reasons() {
  model::Profile& profile = c_.profile;
  std::unordered_map<model::StackId, BlockReason> reasons;
  std::vector<std::string_view> names;
  auto reason_of = [&](model::StackId base) {
    auto [it, fresh] = reasons.try_emplace(base, BlockReason::Unknown);
    if (!fresh) return it->second;
    names.clear();
    for (model::StackId s = base; s != model::kNoStack; s = profile.stacks.prefix(s)) {
      const model::Frame& f = profile.frames.get(profile.stacks.frame(s));
      if (f.kind != model::FrameKind::Kernel) break;  // the kernel part is the top of the stack
      if (f.name != model::kNoString) names.push_back(profile.strings.get(f.name));
    }
    it->second = classify_kernel_frames(names);
    return it->second;
  };
  std::unordered_map<model::StackId, model::StackId> relabeled;
  for (model::Process& proc : profile.processes) {
    for (model::Thread& t : proc.threads) {
      for (model::Sample& smp : t.samples) {
        if (smp.stack == model::kNoStack || profile.stacks.frame(smp.stack) != pending_frame_) continue;
        auto [it, fresh] = relabeled.try_emplace(smp.stack, model::kNoStack);
        if (fresh) {
          const model::StackId base = profile.stacks.prefix(smp.stack);
          it->second = profile.stacks.intern(
              base, profile.label_frame(reason_label(reason_of(base)), model::Category::Idle));
        }
        smp.stack = it->second;
      }
      for (model::Wait& w : t.waits) {
        if (w.reason != model::WaitReason::Pending) continue;
        const model::StackId stack = t.markers[w.marker].stack;
        const BlockReason r = stack == model::kNoStack ? BlockReason::Unknown : reason_of(stack);
        w.reason = wait_reason(r);
        if (r != BlockReason::Futex) w.lock = 0;  // an address is a lock's only in a futex wait
        model::make_wait_marker(profile, t, w);
      }
    }
  }
}

}  // namespace fxprof::recorder
