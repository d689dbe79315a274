// The recorder's plan and start passes (session.h): the event and ring buffer sizes from the options and the
// kernel's limits, then the builder, and the launched program or the attached processes with their events.
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "base/path.h"
#include "recorder/machine.h"
#include "recorder/session.h"
#include "recorder/tasks.h"

namespace fxprof::recorder::internal {

namespace {

long read_sysctl(const char* path, long fallback) {
  auto s = live_procfs().read(path);
  if (!s) return fallback;
  char* end = nullptr;
  long v = std::strtol(s->c_str(), &end, 10);
  return end == s->c_str() ? fallback : v;
}

int pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::vector<uint32_t> list_tasks(uint32_t pid) {
  return live_procfs().list("/proc/" + std::to_string(pid) + "/task");
}

size_t floor_pow2(size_t v) {
  size_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
size_t ceil_pow2(size_t v) {
  size_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

// Plan: the event (rate, call graph, permissions) and the ring buffers' sizes, from the options and the
// kernel's limits, before anything is opened: every later pass only opens what this one decided.
Status Session::plan_buffers() {
  if (system_ && !opt_.pids.empty()) return Err("-a records every process: give no -p");
  if (!system_ && launch_ == !opt_.pids.empty())
    return Err(launch_ ? "give either a command or -p PID, not both"
                       : "nothing to record: give a command or -p PID");
  if (!(opt_.frequency_hz >= 1)) return Err("the sampling frequency must be at least 1 Hz");
  if (opt_.heap && !launch_) return Err("--heap records programs fxprof starts: give a command");
  choose_rate();
  configure_events();
  size_buffers();
  model::Profile& prof = rec_.profile;
  prof.meta.interval_ms = 1000.0 / static_cast<double>(freq_);
  const auto cpuinfo = live_procfs().read("/proc/cpuinfo"), meminfo = live_procfs().read("/proc/meminfo");
  describe_machine(cpuinfo ? *cpuinfo : "", meminfo ? *meminfo : "", prof.meta);
  signals_.emplace();  // from here on a Ctrl-C is ours to handle: no pass may lose the recording to it
  return {};
}

void Session::choose_rate() {
  // Frequency: the kernel refuses rates above perf_event_max_sample_rate; lower to it, once, with a notice.
  freq_ = static_cast<uint64_t>(std::llround(opt_.frequency_hz));
  long max_rate = read_sysctl("/proc/sys/kernel/perf_event_max_sample_rate", 100000);
  if (max_rate > 0 && freq_ > static_cast<uint64_t>(max_rate)) {
    notice("sampling at " + std::to_string(max_rate) +
           " Hz, the kernel's limit (kernel.perf_event_max_sample_rate), " + "instead of " +
           std::to_string(freq_) + " Hz");
    freq_ = static_cast<uint64_t>(max_rate);
  }
  paranoid_ = read_sysctl("/proc/sys/kernel/perf_event_paranoid", 2);
  root_ = geteuid() == 0;  // (CAP_PERFMON/CAP_SYS_ADMIN are not checked: the first refusal tells)
}

void Session::configure_events() {
  cfg_.hardware = !opt_.event;  // -e: that event, never the cycles probe
  cfg_.frequency = freq_;
  if (opt_.event) {
    cfg_.event_type = opt_.event->type;
    cfg_.event_config = opt_.event->config;
    cfg_.event_period = opt_.event_period ? opt_.event_period : opt_.event->period;
  }
  cfg_.dwarf = opt_.call_graph == CallGraph::Dwarf;
  cfg_.enable_on_exec = launch_;
  cfg_.cpu_wide = system_;
  if (cfg_.dwarf) {
    uint32_t ss = std::min<uint32_t>(opt_.stack_size, 65528) & ~7u;
    cfg_.stack_size = std::max<uint32_t>(ss, 512);
    cfg_.switch_stack_size =
        std::max<uint32_t>(std::min<uint32_t>(opt_.off_cpu_stack_size, 65528) & ~7u, 512);
    cfg_.regs_mask = user_regs_mask();
    elf::LocatorOptions locator;
    locator.symbol_dirs = opt_.symbol_dirs;
    unwinder_ = std::make_unique<Unwinder>(std::move(locator));
  }
}

// The data pages per CPU an ordinary user's rings may lock: kernel.perf_event_mlock_kb per CPU for all the
// user's processes (516 KiB: 1 + 128 pages), then this process's RLIMIT_MEMLOCK (8 MiB on Debian) on top;
// both split over the CPUs. The budget alone (15 samples of 32 KiB stacks a CPU) lost 6-10% of an ordinary
// user's samples at load 4 with 2 busy loops; RingBuffer::map falls back by halves when another recording of
// the same user holds part of it.
static size_t unprivileged_ring_pages(size_t page, size_t cpus) {
  const long mlock_kb = read_sysctl("/proc/sys/kernel/perf_event_mlock_kb", 516);
  size_t bytes = (mlock_kb > 0 ? static_cast<size_t>(mlock_kb) * 1024 : 129 * page) * cpus;
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
    bytes += rl.rlim_cur == RLIM_INFINITY ? (64u << 20) : static_cast<size_t>(rl.rlim_cur);
  const size_t per_cpu = bytes / page / std::max<size_t>(cpus, 1);  // with each ring's metadata page
  return floor_pow2(per_cpu > 1 ? per_cpu - 1 : 1);
}

void Session::size_buffers() {
  // Ring buffers: DWARF samples are stack_size + ~1 KiB; keep ~32 of them per CPU.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  for (int c = 0; c < std::max(1L, ncpu); ++c) cpus_.push_back(c);
  if (cfg_.dwarf) {
    data_pages_ = ceil_pow2(32 * (cfg_.stack_size + 1024) / page);
    min_pages_ = ceil_pow2(2 * (cfg_.stack_size + 1024) / page);
  } else {
    data_pages_ = 128;  // 512 KiB: ~3,500 FP samples
    min_pages_ = 8;
  }
  // -e: events come in bursts (a page-fault storm is a sample per microsecond): 16 MiB per CPU (64 MiB in
  // all, below) hold ~1,800 samples with 8 KiB stacks while the reader unwinds.
  if (opt_.event) data_pages_ = std::max<size_t>(data_pages_ * 8, ceil_pow2((16u << 20) / page));
  if (opt_.buffer_bytes > 0) {  // --buffer-size: the user's choice (still within the mlock budget's fallback)
    data_pages_ = floor_pow2(std::max<size_t>(1, opt_.buffer_bytes / page));
    min_pages_ = std::min(min_pages_, data_pages_);
  }
  // -a: 8x (16 MiB per CPU with DWARF as root): the reader attaches every running process (/proc, ELF files)
  // while the events already run, and unwinds whatever the machine runs, in bursts.
  if (system_ && opt_.buffer_bytes == 0) data_pages_ *= 8;
  // Switches come at the program's pace, not at -F: their buffers follow the size so far (below).
  const size_t switch_base = data_pages_;
  // Room for 100 ms of samples at -F (a CPU runs one thread at a time: at most -F samples a second reach
  // its ring) where the user did not choose: on a loaded machine the reader waits tens of milliseconds for
  // a CPU, and the 32 DWARF samples of 2 MiB last 8 ms at 4000 Hz. Lost samples bias the shares of the
  // code they were taken in (the first 100 ms of a run are a phase of their own).
  if (cfg_.dwarf && opt_.buffer_bytes == 0)
    data_pages_ = std::max(data_pages_, ceil_pow2(freq_ * (cfg_.stack_size + 1024) / 10 / page));
  if (geteuid() != 0 && opt_.buffer_bytes == 0) {  // locked memory (above); off-CPU stacks need root
    data_pages_ = std::min(data_pages_, unprivileged_ring_pages(page, cpus_.size()));
    min_pages_ = std::min(min_pages_, data_pages_);
  }
  // Big machines: at most 64 MiB of ring buffers in all (2 MiB per CPU up to 32 CPUs).
  data_pages_ = std::min(data_pages_, std::max(min_pages_, floor_pow2((64u << 20) / page / cpus_.size())));
  cfg_.wakeup_bytes = static_cast<uint32_t>(data_pages_ * page / 4);
  // Context switches come in bursts of thousands per second, each with a stack copy: their buffers are 4x
  // larger (8 MiB per CPU with DWARF; off-CPU stacks need root or paranoid <= 1, so no mlock budget
  // applies to root, and an ordinary user's mmap falls back to halves) and wake the reader at a quarter
  // full like the others. Waking it every few switches would preempt the program as often.
  switch_pages_ = std::min(std::min(data_pages_, switch_base) * 4,
                           std::max(min_pages_, floor_pow2((128u << 20) / page / cpus_.size())));
  cfg_.switch_wakeup_bytes = static_cast<uint32_t>(switch_pages_ * page / 4);
  buf_of_cpu_.assign(cpus_.size(), -1);
  switch_buf_of_cpu_.assign(cpus_.size(), -1);
}

// Probes the event on the first target (PMU, paranoid level, off-CPU rights) and makes the builder: both
// start passes need it before the first event runs.
Status Session::prepare_builder() {
  const int probe = system_ ? -1 : pids_[0];  // -a: every task of the CPU
  if (auto s = choose_config(probe); !s) return s;
  // The kernel frames are named at the end from kallsyms, which is slow to generate: read while it runs.
  if (!cfg_.exclude_kernel) live_procfs().prefetch_kernel_symbols();
  if (opt_.off_cpu) choose_off_cpu(probe);
  if (!opt_.capture_path.empty()) {
    auto w = CaptureWriter::create(opt_.capture_path);
    if (!w) return std::move(w).take_error();
    capture_ = std::move(*w);
    procfs_ = &capture_->tap(live_procfs());
  }
  builder_ = std::make_unique<ProfileBuilder>(rec_.profile, unwinder_.get(), cfg_, *procfs_);
  builder_->on_binary_sampled(opt_.on_binary_sampled);
  if (system_) builder_->set_system_wide(opt_.per_cpu);
  sink_ = capture_ ? &capture_->tap(*builder_) : builder_.get();
  OffCpuConfig oc;
  if (opt_.off_cpu) {
    oc.spans = true;
    oc.stacks = switch_stacks_;
    oc.interval_ns = static_cast<uint64_t>(std::llround(1e9 / static_cast<double>(freq_)));
    oc.threshold_ns = static_cast<uint64_t>(std::max(0.0, opt_.off_cpu_threshold_ms) * 1e6);
    builder_->set_off_cpu(oc);
  }
  // The live sources (driver/sources.h), in the driver's order: the waker's wakeups are drained after the
  // buffers' records are collected (its source is added once it is loaded); the heap pipe gives nothing to
  // the rounds.
  driver_ = std::make_unique<Driver>(*sink_);
  sources_.push_back(buffer_source(rings_));
  if (heap_) sources_.push_back(std::move(heap_));  // its events at the driver's finish
  for (const std::unique_ptr<Source>& s : sources_) driver_->add(*s);
  if (switch_stacks_) start_waker();
  model::Profile& prof = rec_.profile;
  if (capture_) capture_->config(cfg_, opt_.off_cpu ? &oc : nullptr, prof.meta.interval_ms);
  prof.meta.start_monotonic_ns = now_ns(CLOCK_MONOTONIC);
  prof.meta.start_unix_ms = static_cast<double>(now_ns(CLOCK_REALTIME)) / 1e6;
  start_ns_ = prof.meta.start_monotonic_ns;
  return {};
}

// The eBPF waker tracer (waker.h): loading parses the kernel's BTF, 30-50 ms on an idle machine here, 627 ms
// at load 8; loaded beside the launched program by default (the program waits for its perf events only),
// before it with --wakers-from-start. Attach mode and -a load it first: the processes run already, and a
// wait seen without its wake would be one more gap for nothing the user waits for.
void Session::start_waker() {
  std::vector<uint32_t> pids(pids_.begin(), pids_.end());
  if (launch_ && !opt_.wakers_from_start) {
    waker_loader_.emplace(cfg_.dwarf, std::move(pids));
    return;
  }
  const uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  adopt_waker(WakerTracer::start(cfg_.dwarf, pids), t0);
}

// The loaded tracer (or why not) joins the recording: it traces the processes seen so far, and its
// source the driver's rounds.
void Session::adopt_waker(Result<std::unique_ptr<WakerTracer>> w, uint64_t began_ns) {
  if (!w) {
    notice("off-CPU: the thread that woke each wait is not recorded (eBPF waker tracer: " + w.error() + ")");
    return;
  }
  waker_ = std::move(*w);
  if (opt_.verbose) {
    const uint64_t at = waker_->attached_ns();
    std::string line = "eBPF waker tracer loaded in " + std::to_string((at - began_ns) / 1000000) + " ms";
    if (running_ns_ && at > running_ns_)
      line += ", attached " + std::to_string((at - running_ns_) / 1000000) + " ms after the program's start";
    notice(line);
  }
  for (uint32_t pid : untraced_pids_) waker_->trace(pid);
  untraced_pids_.clear();
  sources_.push_back(waker_source(*waker_, [this] { return builder_->take_new_pids(); }));
  driver_->add(*sources_.back());
}

// Start (launch): the heap pipe first (--heap), then the child, which waits on a pipe until its events exist
// (enable_on_exec: counting starts at its exec, so fxprof's own fork is never sampled), then runs the
// command.
Status Session::start_launch() {
  // --heap: the heap library goes into the environment the program inherits at its fork; its threads start
  // with the recording's signals blocked (the signal reader, plan_buffers).
  if (opt_.heap) {
    auto h = heap_source(*opt_.heap, opt_.command[0], rec_.profile, heap_outcome_);
    if (!h) return std::move(h).take_error();
    heap_ = std::move(*h);
  }
  auto c = perf::SuspendedChild::spawn(opt_.command, signals_->old_mask());
  if (!c) return std::move(c).take_error();
  child_.emplace(std::move(*c));
  pids_.push_back(child_->pid());
  if (auto s = prepare_builder(); !s) return s;
  std::string cmdline;
  for (const std::string& a : opt_.command) cmdline += (cmdline.empty() ? "" : " ") + a;
  rec_.profile.meta.product = "fxprof: " + cmdline;
  rec_.profile.meta.machine.command_line = cmdline;
  if (auto s = open_target(child_->pid(), true); !s) return s;
  const std::string name = name_with_script(std::string(base_name(opt_.command[0])), opt_.command);
  sink_->on_launched(static_cast<uint32_t>(child_->pid()), name, start_ns_);
  trace_new_pids();  // before it runs
  if (auto s = child_->resume(); !s) return s;
  builder_->keep_executable(static_cast<uint32_t>(child_->pid()));
  pidfds_.emplace_back(pidfd_open(child_->pid()));
  return {};
}

// Start (attach): one event per thread and CPU; the process's threads and mappings are read from /proc once
// the events run, so nothing that happens after is missed (and what happened before is in /proc).
Status Session::start_attach() {
  for (int pid : opt_.pids) {
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
      return Err("no process with pid " + std::to_string(pid));
    pids_.push_back(pid);
  }
  // One event per (thread, CPU); lift the soft fd limit for programs with many threads.
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (auto s = prepare_builder(); !s) return s;
  std::string list;
  for (int pid : pids_) list += (list.empty() ? "" : ",") + std::to_string(pid);
  rec_.profile.meta.product = "fxprof: attached to " + list;
  rec_.profile.meta.machine.command_line = "-p " + list;
  for (int pid : pids_) {
    for (uint32_t tid : list_tasks(static_cast<uint32_t>(pid)))
      if (auto s = attach_thread(static_cast<int>(tid)); !s) return s;
    // Events run from here on, so mappings and threads read now miss nothing that follows.
    sink_->on_attached(static_cast<uint32_t>(pid), start_ns_);
    trace_new_pids();
    // Threads started while we attached: scan again until no new ones (new ones after our events inherit).
    for (int round = 0; round < 20; ++round) {
      bool fresh = false;
      for (uint32_t tid : list_tasks(static_cast<uint32_t>(pid)))
        if (!attached_tids_.count(static_cast<int>(tid))) {
          fresh = true;
          if (auto s = attach_thread(static_cast<int>(tid)); !s) return s;
          const uint64_t t = now_ns(CLOCK_MONOTONIC);
          sink_->on_attached_thread(static_cast<uint32_t>(pid), tid, t);
        }
      if (!fresh) break;
    }
  }
  for (int pid : pids_) pidfds_.emplace_back(pidfd_open(pid));
  return {};
}

}  // namespace fxprof::recorder::internal
