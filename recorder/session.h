// The recorder's internals (recorder.h): one recording as a Session and its passes (recorder.cpp runs them;
// recorder_start.cpp, recorder_events.cpp, recorder_read.cpp and recorder_summary.cpp hold them).
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "base/signals.h"
#include "perf/launcher.h"
#include "recorder/builder.h"
#include "recorder/capture.h"
#include "recorder/host.h"
#include "recorder/kallsyms.h"
#include "recorder/perf.h"
#include "recorder/proc_counters.h"
#include "recorder/quality.h"
#include "recorder/recorder.h"
#include "recorder/records.h"
#include "recorder/rss.h"
#include "recorder/sources.h"
#include "recorder/unwind/unwinder.h"
#include "recorder/waker.h"

namespace fxprof::recorder::internal {

uint64_t now_ns(clockid_t clock);
double cpu_ms(const rusage& ru);

// One recording. run() (recorder.cpp) reads as the list of its passes, each a member function
// (recorder_*.cpp); the state they hand on to each other is the members.
class Session {
 public:
  explicit Session(const Options& o)
      : opt_(o), launch_(!o.command.empty() && !o.system_wide), system_(o.system_wide) {}
  Result<Recording> run();

 private:
  Status pass(const char* name, Status (Session::*step)());
  Status plan_buffers();  // the rate, the events and the buffers' sizes:
  void choose_rate();
  void configure_events();
  void size_buffers();
  Status prepare_builder();
  Status start_launch();
  Status start_attach();
  Status start_system();  // -a (recorder_system.cpp)
  void system_quality(std::vector<QualityProblem>& problems);
  void prune_idle_tasks();
  Status read_until_stop();
  bool cut_window(uint64_t now);  // Options::window_s (recorder_window.cpp)
  void reap(int pid);
  Status drain();
  Status finish_profile();
  Status summarize();
  void verbose_summary();

  Status choose_config(int pid);
  void choose_off_cpu(int pid);
  Status open_target(int pid, bool required);
  Status attach_thread(int tid);
  size_t read_round(bool everything);
  void
  trace_new_pids();    // the waker tracer traces the processes the builder saw (its source does each round)
  void start_waker();  // off-CPU as root: who woke each wait (recorder_start.cpp)
  void adopt_waker(Result<std::unique_ptr<WakerTracer>> w, uint64_t began_ns);
  void poll_waker_loader();
  std::optional<QualityProblem> untraced_wakers() const;
  void notice(const std::string& s) {
    if (!opt_.quiet) std::fprintf(stderr, "fxprof: %s\n", s.c_str());
  }

  void report_stack_walk(model::Profile& prof);
  void report_data_quality(model::Profile& prof);

  const Options& opt_;
  const bool launch_;  // a command to run (else -p PIDs, or -a)
  const bool system_;  // -a: every task of every CPU (a command, if any, only says when to stop)
  uint64_t freq_ = 0;  // the sampling rate used (the kernel's limit may lower the one asked for)
  EventConfig cfg_;
  long paranoid_ = 2;  // kernel.perf_event_paranoid
  bool root_ = false;  // not limited by it
  std::vector<int> cpus_;
  size_t data_pages_ = 128, min_pages_ = 8;
  size_t switch_pages_ = 128;  // off-CPU stacks: data pages of each context-switches buffer
  std::vector<UniqueFd> fds_;
  RingSet rings_{record_time};   // one per CPU: every other event of that CPU writes into it (SET_OUTPUT)
  std::vector<int> buf_of_cpu_;  // index into rings_, -1 = none yet
  // Off-CPU stacks: the context-switches events write into a second buffer per CPU, so that their samples
  // are known by where they come from (the same sample layout, another register mask). It comes after the
  // CPU's first buffer in rings_: a switch record read there had its sample written (before it) already.
  bool switch_stacks_ = false;
  std::vector<int> switch_buf_of_cpu_;
  // The boundary (recorder/host.h): records come from the live sources (driver/sources.h: the ring buffers,
  // the waker tracer, the heap pipe) through the driver to sink_, /proc answers from procfs_ (the live
  // /proc); when Options::capture_path asks for a capture, sink_ and procfs_ are the capture's taps, which
  // write what passes through them.
  Procfs* procfs_ = &live_procfs();
  std::unique_ptr<CaptureWriter> capture_;
  std::unique_ptr<Unwinder> unwinder_;
  std::unique_ptr<ProfileBuilder> builder_;
  RecordSink* sink_ = nullptr;  // what the builder is fed through: the builder, or the capture before it
  std::unique_ptr<WakerTracer> waker_;  // off-CPU: who woke each wait (optional, eBPF)
  // Loading beside the program (Options::wakers_from_start unset) until waker_ is there; the processes the
  // builder saw meanwhile are traced once it is.
  std::optional<WakerLoader> waker_loader_;
  std::vector<uint32_t> untraced_pids_;
  // Options::heap: the heap pipe (recorder/sources.h), started before the program is forked and added to the
  // driver after the other sources; what it could not see, known at the driver's finish.
  std::unique_ptr<Source> heap_;
  HeapOutcome heap_outcome_;
  std::vector<std::unique_ptr<Source>> sources_;
  std::unique_ptr<Driver> driver_;
  std::set<int> attached_tids_;
  // Launch and attach: the processes given, and their pidfds (invalid when pidfd_open is missing).
  // SIGINT/SIGTERM/SIGHUP, read from a signalfd: a Ctrl-C never kills the caller before it writes the
  // profile.
  std::optional<SignalReader> signals_;
  std::optional<perf::SuspendedChild> child_;
  std::vector<int> pids_;
  std::vector<UniqueFd> pidfds_;
  bool child_exited_ = false;
  std::optional<RssSampler> rss_;
  std::optional<ProcCounters> counters_;  // faults, switches, run delay per process (proc_counters.h)
  uint64_t start_ns_ = 0, exit_seen_ns_ = 0;
  uint64_t running_ns_ = 0;  // the end of the start pass: the program runs (launch) or is attached
  // Options::window_s: when the current window started; the kernel's names, read at the first window.
  uint64_t window_start_ns_ = 0;
  std::optional<KernelSymbols> window_kernel_;
  struct Phase {
    const char* name;
    double ms;
  };
  std::vector<Phase> phases_;
  Recording rec_;
};

}  // namespace fxprof::recorder::internal
