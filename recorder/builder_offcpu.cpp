// The profile builder's off-CPU spans (builder.h, recorder/offcpu.h): switch records time each wait, which
// becomes samples and markers; the switch-out samples' stacks are unwound only for the spans that need them.
#include <algorithm>
#include <cstdio>

#include "recorder/builder.h"
#include "recorder/offcpu.h"
#include "recorder/quality.h"

namespace fxprof::recorder {

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

void ProfileBuilder::on_switch(const SwitchRecord& sw) {
  auto it = threads_.find(sw.tid);
  if (it == threads_.end()) return;
  CpuState& c = it->second.cpu;
  OffState& o = it->second.off;
  if (sw.out) {
    if (c.on && sw.time > c.since) c.acc += sw.time - c.since;
    c.on = false;
    c.known = true;
    o.out = true;
    o.out_ns = sw.time;
    o.preempted = sw.preempted;
  } else {
    c.on = true;
    c.known = true;
    c.since = sw.time;
    if (o.out && off_.spans) end_off_span(it->second, sw.time);
    o.out = false;
    o.have_stack = false;  // a stack belongs to the switch-out that follows it, nothing later
    o.pending = false;
  }
}

void ProfileBuilder::add_wakings(std::span<Waking> w) {
  for (const Waking& k : w) {
    std::deque<uint64_t>& times = wake_times_[k.wakee_tid];  // in time order, but for CPUs' races
    times.insert(std::upper_bound(times.begin(), times.end(), k.time), k.time);
  }
  for (const std::unique_ptr<Tracker>& t : trackers_) t->on_wakings(w);
}

void ProfileBuilder::set_off_cpu(const OffCpuConfig& c) {
  off_ = c;
  if (!off_.spans || off_interned_) return;
  off_interned_ = true;
  ctx_.off_cpu = true;
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
  s.fields.push_back({"holder", "Held by", "string"});  // pipeline::add_lock_holders, once symbolicated
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
  // Strings of the wakers tracker (wakes.h), interned here with its marker schema.
  profile_.strings.intern("Wakeup");
  profile_.strings.intern("wakee");
  off_type_ = profile_.strings.intern("OffCpu");
  blocked_name_ = profile_.strings.intern("Blocked");
  preempted_name_ = profile_.strings.intern("Preempted");
  lock_name_ = profile_.strings.intern("Lock wait");
  reason_key_ = profile_.strings.intern("reason");
  lock_key_ = profile_.strings.intern("lock");
  profile_.strings.intern("waker");
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
      o.pending = false;
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

void ProfileBuilder::resolve_stack(ThreadRef& th) {
  OffState& o = th.off;
  if (!o.pending) return;
  if (sample_path(o.pending_sample)) {
    o.stack = profile_.stacks.intern_path(path_);
    o.uaddr = o.pending_sample.di;
    ++switch_stacks_unwound_;
  } else {
    o.have_stack = false;
  }
  o.pending = false;
}

void ProfileBuilder::resolve_pending(uint32_t pid, uint64_t before_ns) {
  for (uint32_t tid : pending_tids_)
    if (auto it = threads_.find(tid); it != threads_.end()) {
      resolve_stack(it->second);
      it->second.off.queued = false;
    }
  pending_tids_.clear();
  release(pid, before_ns);
  // Processes whose exec was still setting up when their EXIT was read: named while they still run.
  for (UnfollowedExec& u : unfollowed_) name_unfollowed(procfs_, u);
}

void ProfileBuilder::close_off_spans(uint64_t end_ns) {
  if (!off_.spans) return;
  for (auto& [tid, th] : threads_)
    if (th.off.out && end_ns > th.off.out_ns) {
      end_off_span(th, end_ns);
      th.off.out = false;
    }
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
