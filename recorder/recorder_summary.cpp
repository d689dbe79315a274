// The recorder's finish and summarize passes (session.h): the profile completed once every record is in, its
// counts, the data-quality lines (stack walk, lost records, unfollowed execs, deleted binaries), -v's lines.
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "recorder/quality.h"
#include "recorder/session.h"
#include "recorder/unwind/report.h"

namespace fxprof::recorder::internal {

// Finish: what could only be done once every record is in: waits still open end at the exit, kernel and
// JIT frames get their names (from the kallsyms table read while the program ran), the RSS series become
// counters, the heap pipe's events (--heap) become allocation rows and a Memory counter.
Status Session::finish_profile() {
  driver_->end(exit_seen_ns_);
  rss_->finish(rec_.profile);
  counters_->finish(rec_.profile);
  if (system_) prune_idle_tasks();
  // Sources whose events did not go through the rounds (the heap pipe) hand them over now, once the builder
  // made the processes, threads and libs their stacks go through: in the model before the passes run.
  driver_->finish();
  if (opt_.verbose && counters_->ticks())
    notice("counter tracks (faults, switches, run delay): " + std::to_string(counters_->ticks()) +
           " ticks, " + std::to_string(counters_->tick_ns() / counters_->ticks() / 1000) + " us each, " +
           std::to_string(counters_->tick_ns() / 1000000) + " ms in all");
  if (capture_) return capture_->flush();
  return {};
}

// Summarize: the counts the CLI prints, the data-quality lines (lost records, incomplete stacks) and, with
// -v, what the recorder chose and how long each pass took.
Status Session::summarize() {
  model::Profile& prof = rec_.profile;
  Stats& st = rec_.stats;
  st.samples = builder_->samples() + builder_->off_cpu_samples();
  st.off_cpu_stacks = switch_stacks_;
  st.switch_samples = builder_->switch_samples();
  st.off_cpu_spans = builder_->off_cpu_spans();
  st.off_cpu_samples = builder_->off_cpu_samples();
  st.lost_records = builder_->lost();
  st.idle_samples = builder_->idle_samples();
  st.throttles = builder_->throttled();
  st.processes = static_cast<uint32_t>(prof.processes.size());
  for (const model::Process& p : prof.processes) st.threads += static_cast<uint32_t>(p.threads.size());
  st.duration_s = static_cast<double>(exit_seen_ns_ - start_ns_) / 1e9;
  st.kernel_frames = !cfg_.exclude_kernel;
  st.hardware_event = cfg_.hardware;
  st.frequency_hz = static_cast<double>(freq_);
  st.event_period = cfg_.event_period;
  st.finish_ms = static_cast<double>(now_ns(CLOCK_MONOTONIC) - exit_seen_ns_) / 1e6;
  rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) st.reader_cpu_ms = cpu_ms(ru);
  if (unwinder_) report_stack_walk(prof);
  report_data_quality(prof);
  rec_.open_files = builder_->take_kept_files();  // deleted binaries are read through them (Lib::read_path)
  if (child_ && !child_exited_) {                 // --duration: the program keeps running
    rec_.exit_status = 0;
    rec_.reaper = std::make_unique<ChildReaper>(child_->pid());
  }
  if (opt_.verbose) verbose_summary();
  return {};
}

void Session::verbose_summary() {
  const Stats& st = rec_.stats;
  if (unwinder_) {
    const UnwindStats& u = unwinder_->stats();
    notice("DWARF unwinding: " + std::to_string(u.stacks) + " stacks, " + std::to_string(u.complete) +
           " complete, " + std::to_string(u.truncated) + " truncated by the " +
           std::to_string(cfg_.stack_size) + "-byte copy, " + std::to_string(u.failed) + " failed; " +
           std::to_string(u.modules) + " binaries; through code without CFI: " + std::to_string(u.fp_stacks) +
           " by frame pointers, " + std::to_string(u.scanned_stacks) + " by scanning for return addresses");
  }
  if (builder_->jit_functions() > 0)
    notice(std::to_string(builder_->jit_functions()) +
           " JIT code ranges named from perf maps and jitdump files");
  if (opt_.off_cpu)
    notice("off-CPU: " + std::to_string(st.off_cpu_spans) + " blocked or preempted spans, " +
           std::to_string(st.switch_samples) + " context-switch stacks (" +
           std::to_string(builder_->switch_stacks_unwound()) + " unwound: the others' spans needed none), " +
           std::to_string(st.off_cpu_samples) + " off-CPU samples" +
           (switch_stacks_ ? "" : " (no stacks: spans as markers only)"));
  if (waker_) {
    // Its cost, in the threads that woke others: known only while kernel.bpf_stats_enabled is 1.
    const auto [runs, run_ns] = waker_->run_stats();
    char cost[96] = "";
    if (runs > 0)
      std::snprintf(cost, sizeof cost, "; %llu runs, %.2f us a run", static_cast<unsigned long long>(runs),
                    static_cast<double>(run_ns) / 1e3 / static_cast<double>(runs));
    notice("eBPF waker tracer: " + std::to_string(builder_->wakes()) + " wakeups, " +
           std::to_string(builder_->waker_stacks()) + " waker stacks unwound (futex wakes), " +
           std::to_string(waker_->dropped()) + " lost, ring at most " +
           std::to_string(waker_->ring_use().first / 1024) + " of " +
           std::to_string(waker_->ring_use().second / 1024) + " KiB full" + cost);
  }
  notice("recording thread CPU time " + std::to_string(static_cast<int>(st.reader_cpu_ms)) + " ms");
  notice(std::to_string(st.samples) + " samples, " + std::to_string(st.threads) + " threads in " +
         std::to_string(st.processes) + " processes; profile built " + std::to_string(st.finish_ms) +
         " ms after the recording ended");
  // The passes' wall times (summarize, which prints this, is not in it); "read" is the program's run time.
  std::string line = "passes:";
  char buf[64];
  for (const Phase& ph : phases_) {
    std::snprintf(buf, sizeof buf, " %s %.1f ms,", ph.name, ph.ms);
    line += buf;
  }
  line.pop_back();
  notice(line);
}

// DWARF mode: the walk's counts go into the profile's meta, and one line names where stacks stopped
// short when more than 5 % of a thread's did (recorder/unwind/report.h).
void Session::report_stack_walk(model::Profile& prof) {
  const UnwindStats& u = unwinder_->stats();
  prof.meta.stack_walk =
      model::Meta::StackWalk{u.stacks, u.truncated, u.failed, u.fp_stacks, u.scanned_stacks};
  std::vector<bool> marker(prof.frames.size()), off_leaf(prof.frames.size());
  for (size_t f = 0; f < prof.frames.size(); ++f) {
    const model::Frame& fr = prof.frames.get(static_cast<model::FrameId>(f));
    marker[f] = fr.kind == model::FrameKind::Label && prof.strings.get(fr.name) == "(stack truncated)";
    // The reason leaf of off-CPU samples ([blocked: ...], [preempted]).
    off_leaf[f] = fr.kind == model::FrameKind::Label && fr.category == model::Category::Idle;
  }
  std::vector<uint8_t> incomplete(prof.stacks.size());  // the builder puts the marker at the root
  for (size_t s = 0; s < prof.stacks.size(); ++s) {
    const auto id = static_cast<model::StackId>(s);
    const model::StackId prefix = prof.stacks.prefix(id);
    incomplete[s] = prefix == model::kNoStack ? marker[prof.stacks.frame(id)] : incomplete[prefix];
  }
  // On-CPU samples per thread for the line about --stack-size; off-CPU ones (their own, smaller copy:
  // --off-cpu-stack-size) counted apart.
  std::vector<ThreadStacks> threads;
  uint64_t off_samples = 0, off_incomplete = 0;
  for (const model::Process& p : prof.processes) {
    for (const model::Thread& t : p.threads) {
      ThreadStacks ts{t.name, t.tid, 0, 0};
      for (const model::Sample& smp : t.samples) {
        const bool known = smp.stack != model::kNoStack && smp.stack < incomplete.size();
        const bool cut = known && incomplete[smp.stack];
        if (known && off_leaf[prof.stacks.frame(smp.stack)]) {
          ++off_samples;
          off_incomplete += cut;
        } else {
          ++ts.samples;
          ts.incomplete += cut;
        }
      }
      threads.push_back(std::move(ts));
    }
  }
  std::string line = incomplete_stacks_warning(threads, unwinder_->stops(), cfg_.stack_size);
  if (!line.empty()) notice(line);
  if (off_samples >= 20 && off_incomplete * 20 > off_samples)
    notice(std::to_string(off_incomplete * 100 / off_samples) +
           "% of the off-CPU stacks are incomplete; if the " + std::to_string(cfg_.switch_stack_size) +
           "-byte stack copy cut them, raise --off-cpu-stack-size (at most 65528; each context switch "
           "copies it)");
}

// The eBPF waker tracer attached after the launched program started (it loads beside it: waker.h): how
// long its wakes went unseen, those waits without "Woken by" (nothing when its load failed: a notice said
// so).
std::optional<QualityProblem> Session::untraced_wakers() const {
  // No samples: the recording is refused (cli/cmd_record.cpp), and its error is then the one line said. A
  // program blocked all along (off-CPU samples only) is kept, and its waits are what the line is about.
  if ((!waker_loader_ && !waker_) || rec_.stats.samples == 0) return std::nullopt;
  const uint64_t from = running_ns_, end = std::max(exit_seen_ns_, from);
  const uint64_t at = waker_ ? waker_->attached_ns() : UINT64_MAX;
  if (at <= from) return std::nullopt;
  const uint64_t ms = (std::min(at, end) - from + 999999) / 1000000;
  const bool never = at >= end;
  return QualityProblem{
      never ? "Wakers not traced: the eBPF tracer was still loading"
            : "Wakers untraced while the eBPF tracer loaded (ms)",
      ms,
      "off-CPU: wakers not traced for the " + std::string(never ? "whole " : "first ") + std::to_string(ms) +
          " ms of the program (the eBPF waker tracer was " + (never ? "still loading" : "loading") +
          "): waits that ended then have no \"Woken by\"; --wakers-from-start waits for it"};
}

// Every data-quality line and meta entry, through the one mechanism (recorder/quality.h).
void Session::report_data_quality(model::Profile& prof) {
  std::vector<QualityProblem> problems;
  if (child_ && !opt_.command.empty()) {
    const std::string path = command_path(opt_.command[0]);
    if (std::string why = unprofilable_reason(path); !why.empty())
      builder_->launch_not_followed(static_cast<uint32_t>(child_->pid()), path, why);
  }
  for (UnfollowedExec& u : builder_->unfollowed()) name_unfollowed(*procfs_, u);
  if (!builder_->unfollowed().empty()) {
    problems.push_back(unfollowed_problem(builder_->unfollowed()));
    rec_.stats.not_followed = problems.back().line;
  }
  for (const std::string& refused : builder_->jit_refused())
    problems.push_back({"JIT names not used (file not the process's): " + refused, 1,
                        refused + ": its JIT function names were not used (a perf map or jitdump must belong "
                                  "to the process's user or root and be writable by no one else)"});
  for (const std::string& dropped : builder_->jit_dropped())
    problems.push_back({"JIT names dropped: " + dropped, 1, "JIT names dropped: " + dropped});
  if (unwinder_)  // named in the incomplete-stacks line already: meta entries only
    for (const UnwindStop& s : unwinder_->stops())
      if (s.corrupt > 0)
        problems.push_back({"Stacks stopped at a damaged .eh_frame: " + s.path, s.corrupt, ""});
  for (const std::string& path : builder_->deleted_read())
    problems.push_back({"Deleted while running, read from the open file: " + path, 1, ""});
  if (!builder_->deleted_unreadable().empty()) {
    std::string names;
    for (const std::string& path : builder_->deleted_unreadable())
      names += (names.empty() ? "" : ", ") + path;
    problems.push_back(
        {"Deleted while running, not readable: " + names, builder_->deleted_unreadable().size(),
         names + " deleted or replaced while running and not readable through /proc/PID/map_files (needs "
                 "root): its stacks may be incomplete and its functions unnamed. Keep the binary until the "
                 "recording ends, or record as root"});
  }
  if (auto u = untraced_wakers()) problems.push_back(std::move(*u));
  if (const uint64_t lost = waker_ ? waker_->dropped() : 0; lost > 0)
    problems.push_back({"Wakeups lost (eBPF ring buffer full)", lost,
                        std::to_string(lost) +
                            " wakeups lost: the eBPF waker tracer's ring buffer was full (the reader fell "
                            "behind), so some waits have no \"Woken by\" and no Wakeup marker"});
  if (rec_.stats.lost_records) {
    problems.push_back(lost_records_problem(rec_.stats.lost_records, builder_->unknown_code_samples(),
                                            builder_->unknown_code_processes(),
                                            earliest_marker(prof, "Lost records")));
    if (builder_->unknown_code_samples() > 0)
      problems.push_back({"Samples in code whose mapping was lost", builder_->unknown_code_samples(), ""});
  }
  if (system_) system_quality(problems);
  // The heap pipe's (--heap): an allocator the heap library cannot see, streams cut short.
  for (QualityProblem& q : heap_outcome_.problems) problems.push_back(std::move(q));
  if (opt_.quiet)
    for (QualityProblem& q : problems) q.line.clear();
  report_quality(prof, problems);
  if (!heap_outcome_.uprobes_line.empty()) notice(heap_outcome_.uprobes_line);
  rec_.stats.heap_incomplete = std::move(heap_outcome_.incomplete);
}

}  // namespace fxprof::recorder::internal
