// The profile builder's core (builder.h): records dispatched by type, CPU samples and the stacks they
// unwind, lost records, and finish(). Its other parts are the builder_*.cpp files.
#include "recorder/builder.h"

#include <array>
#include <cstring>

#include "model/symbols.h"
#include "recorder/builder_record.h"
#include "recorder/interrupted.h"
#include "recorder/kallsyms.h"
#include "recorder/offcpu.h"
#include "recorder/own_frames.h"
#include "recorder/unwind/splice.h"

namespace fxprof::recorder {

using internal::Reader;
using internal::Trailer;
using internal::trailer;

ProfileBuilder::ProfileBuilder(model::Profile& profile, Unwinder* unwinder, const EventConfig& events,
                               Procfs& procfs)
    : profile_(profile), unwinder_(unwinder), procfs_(procfs), events_(events) {
  path_.reserve(2048);
  user_.reserve(1024);
  kernel_.reserve(256);
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
  r.u64();                                                  // ip (the callchain repeats it)
  r.u64();                                                  // pid/tid
  r.u64();                                                  // time
  r.u64();                                                  // cpu
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

void ProfileBuilder::finish() {
  resolve_wakes(0, 0);  // the waits still open at the end are closed (close_off_spans): none is open now
  pending_wakes_.clear();
  read_deleted_libs();
  name_kernel_frames(profile_, procfs_);
  if (off_interned_) name_off_cpu_reasons();
  mark_interrupted_frames(profile_, reason_label(BlockReason::Preempted));
  if (off_interned_) model::add_waiting_counters(profile_, off_.interval_ns);
  if (off_interned_ && !wakes_.empty()) name_wakers();
  for (auto& [pid, pr] : procs_) read_jit(pid, pr);  // processes still running
  model::name_jit_frames(profile_);
  mark_heap_shim_frames(profile_);
}

}  // namespace fxprof::recorder
