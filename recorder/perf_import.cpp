// A perf.data file fed to the profile builder (perf_import.h): the file's /proc, the choice of event, the
// filters, the rounds, then the build-ID check and the header's facts in the meta.
#include "recorder/perf_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "base/fd.h"
#include "elf/elf.h"
#include "perf/tracepoints.h"
#include "recorder/builder.h"
#include "recorder/quality.h"
#include "recorder/sources.h"
#include "recorder/unwind/unwinder.h"

namespace fxprof::recorder {

namespace {

// The GNU build ID in /sys/kernel/notes (the running kernel's), "" when unreadable.
std::string running_kernel_build_id() {
  auto notes = read_file("/sys/kernel/notes");
  if (!notes) return {};
  std::string_view n = *notes;
  while (n.size() >= 12) {
    uint32_t namesz, descsz, type;
    std::memcpy(&namesz, n.data(), 4);
    std::memcpy(&descsz, n.data() + 4, 4);
    std::memcpy(&type, n.data() + 8, 4);
    const size_t name_len = (namesz + 3) & ~3u, desc_len = (descsz + 3) & ~3u;
    if (n.size() - 12 < name_len || n.size() - 12 - name_len < desc_len) break;
    if (type == 3 && namesz == 4 && n.substr(12, 3) == "GNU")
      return std::string(n.substr(12 + name_len, descsz));
    n.remove_prefix(12 + name_len + desc_len);
  }
  return {};
}

// Whether the file was recorded on the kernel running now: its kernel build ID, else its release and host.
bool recorded_on_this_kernel(const perf::Features& f) {
  for (const perf::BuildIdEntry& b : f.build_ids)
    if (b.path == "[kernel.kallsyms]" && !b.build_id.empty()) {
      const std::string running = running_kernel_build_id();
      return !running.empty() && running.starts_with(b.build_id);
    }
  struct utsname un;
  return uname(&un) == 0 && f.os_release == un.release && f.hostname == un.nodename;
}

// The recording's /proc, from the file: thread names from its COMM records (the processes are gone), the
// kernel's function names from this machine's kallsyms when it is the kernel that was recorded.
class FileProcfs final : public Procfs {
 public:
  FileProcfs(const perf::DataFile& file, bool kernel) : kernel_(kernel) {
    for (const perf::RecordAt& r : file.records) {
      if (r.h->type != PERF_RECORD_COMM) continue;
      const perf::Record rec = perf::decode(r.h, file.layout);
      if (const auto* c = std::get_if<perf::CommRecord>(&rec))
        comm_.try_emplace(c->tid, std::string(c->comm));
    }
  }
  Result<std::string> read(const std::string& path) override {
    // "/proc/PID/task/TID/comm" or "/proc/PID/comm": the first name the file gave the thread.
    if (path.ends_with("/comm")) {
      const std::string dir = path.substr(0, path.size() - 5);
      const uint32_t tid = static_cast<uint32_t>(std::strtoul(dir.c_str() + dir.rfind('/') + 1, nullptr, 10));
      if (auto it = comm_.find(tid); it != comm_.end()) return it->second;
    }
    return Err(path + ": not in the perf.data file");
  }
  std::vector<uint32_t> list(const std::string&) override { return {}; }
  std::vector<std::string> kernel_symbols(std::span<const uint64_t> addrs) override {
    if (!kernel_) return {};
    return live_procfs().kernel_symbols(addrs);
  }

 private:
  bool kernel_;
  std::unordered_map<uint32_t, std::string> comm_;
};

// The scheduler's tracepoints in the file (perf record -e sched:sched_switch -e sched:sched_wakeup, perf
// sched record): sched_switch's samples are switch-outs, whose stacks the waits get (the context-switches
// samples of `record --off-cpu`), and, without perf's own switch records (--switch-events), the switches
// themselves; the wakeups name each wait's waker (the eBPF waker tracer's part in `record`).
struct SchedEvents {
  std::optional<uint32_t> switch_event, wakeup_event;
  bool switch_records = false;  // PERF_RECORD_SWITCH(_CPU_WIDE) in the file: the switches are those
  bool stacks = false;          // sched_switch has callchains (-g)
  perf::SchedFields fields;

  explicit SchedEvents(const perf::DataFile& file) : fields(file.features.tracing_data) {
    std::optional<uint32_t> waking, wakeup;
    for (uint32_t e = 0; e < file.events.size(); ++e) {
      const std::string& name = file.events[e].name;
      if (name == "sched:sched_switch") {
        switch_event = e;
        stacks = file.events[e].attr.sample_type & PERF_SAMPLE_CALLCHAIN;
      }
      if (name == "sched:sched_waking") waking = e;
      if (name == "sched:sched_wakeup") wakeup = e;
    }
    wakeup_event = waking ? waking : wakeup;  // the earlier of the two, when both were recorded
    for (const perf::RecordAt& r : file.records)
      switch_records |= r.h->type == PERF_RECORD_SWITCH || r.h->type == PERF_RECORD_SWITCH_CPU_WIDE;
  }
  bool is_sched(uint32_t e) const { return e == switch_event || e == wakeup_event; }
};

// Which records go to the builder: the chosen event's samples, the side-band records, the filters.
struct Filter {
  std::optional<uint32_t> event;  // none: the file has only the scheduler's tracepoints
  const SchedEvents* sched = nullptr;
  bool all_events = false;  // the other events' samples too (ImportOptions::event_tracks)
  std::unordered_set<uint32_t> pids, tids;
  uint64_t start = 0, end = ~uint64_t{0};

  bool wants(uint32_t pid, uint32_t tid) const {
    return (pids.empty() || pids.count(pid)) && (tids.empty() || tids.count(tid));
  }
  bool keep(const perf::Record& r) const {
    if (const auto* s = std::get_if<perf::SampleRecord>(&r))
      return (all_events || s->event == event || sched->is_sched(s->event)) && s->time >= start &&
             s->time <= end && wants(s->pid, s->tid);
    if (const auto* m = std::get_if<perf::Mmap2Record>(&r))
      return m->pid != ~uint32_t{0} &&
             (pids.empty() || pids.count(m->pid));  // the kernel's (pid -1): not a process
    if (const auto* c = std::get_if<perf::CommRecord>(&r)) return pids.empty() || pids.count(c->pid);
    if (const auto* f = std::get_if<perf::ForkRecord>(&r)) return pids.empty() || pids.count(f->pid);
    if (const auto* e = std::get_if<perf::ExitRecord>(&r)) return pids.empty() || pids.count(e->pid);
    return true;
  }
};

// The event whose samples make the profile: the one named, else the first with samples but for the
// scheduler's tracepoints (off-CPU waits, not CPU samples); none when those are all the file has.
Result<std::optional<uint32_t>> choose_event(const perf::DataFile& file, const ImportOptions& o,
                                             const SchedEvents& sched, ImportStats& st) {
  std::vector<uint64_t> counts(file.events.size());
  for (const perf::RecordAt& r : file.records)
    if (r.h->type == PERF_RECORD_SAMPLE) {
      const uint32_t e = file.layout.event_of(r.h);
      if (e < counts.size()) ++counts[e];
    }
  std::optional<uint32_t> chosen;
  for (uint32_t e = 0; e < counts.size(); ++e) {
    const std::string& name = file.events[e].name;
    if (counts[e]) st.events.emplace_back(name, counts[e]);
    const bool named = !o.event.empty() && (name == o.event || name.substr(0, name.find(':')) == o.event);
    if (!chosen && (named || (o.event.empty() && counts[e] && !sched.is_sched(e)))) chosen = e;
  }
  if (!chosen && o.event.empty() && sched.switch_event && counts[*sched.switch_event]) {
    st.event = "off-CPU (sched:sched_switch)";
    return std::optional<uint32_t>();
  }
  if (!chosen) {
    std::string names;
    for (const perf::Event& e : file.events) names += (names.empty() ? "" : ", ") + e.name;
    if (!o.event.empty()) return Err("no event " + o.event + " in the file (its events: " + names + ")");
    return Err("the file has no samples (its events: " + names + ")");
  }
  st.event = file.events[*chosen].name;
  st.file_samples = counts[*chosen];
  return chosen;
}

// Header features into the meta: the machine, the command, the interval.
void describe(const perf::DataFile& file, const perf_event_attr& attr, model::Profile& p) {
  const perf::Features& f = file.features;
  std::string cmd;
  for (const std::string& w : f.cmdline) cmd += (cmd.empty() ? "" : " ") + w;
  p.meta.machine.command_line = cmd;
  p.meta.machine.logical_cpus = f.cpus_online;
  p.meta.machine.main_memory = f.total_mem_kb * 1024;
  p.meta.machine.cpu_name = f.cpu_desc;
  if (!f.os_release.empty()) p.meta.oscpu = "Linux " + f.os_release + (f.arch.empty() ? "" : " " + f.arch);
  p.meta.product = "fxprof import: " + (cmd.empty() ? std::string("perf.data") : cmd) +
                   (f.hostname.empty() ? "" : " (on " + f.hostname + ")");
  if (attr.freq && attr.sample_freq)
    p.meta.interval_ms = 1000.0 / static_cast<double>(attr.sample_freq);
  else if (!attr.freq && attr.sample_period && attr.type == PERF_TYPE_SOFTWARE && attr.config <= 1)
    p.meta.interval_ms = static_cast<double>(attr.sample_period) / 1e6;  // cpu-clock, task-clock: ns
}

// Libraries whose binary on disk is not the one recorded keep the recorded build ID: the symbolizer then
// looks for that one (by ID, --symbol-dir, debuginfod) and never names frames from the wrong file.
void check_build_ids(const perf::DataFile& file, model::Profile& p) {
  std::unordered_map<std::string, const std::string*> recorded;
  for (const perf::BuildIdEntry& b : file.features.build_ids)
    if (!b.build_id.empty()) recorded[b.path] = &b.build_id;
  std::vector<QualityProblem> problems;
  std::unordered_set<std::string> said;
  for (model::Process& proc : p.processes)
    for (model::Lib& lib : proc.libs) {
      auto it = recorded.find(lib.path);
      if (it == recorded.end()) continue;
      const std::vector<uint8_t> id(it->second->begin(), it->second->end());
      const std::string hex = elf::hex(id);
      if (lib.code_id == hex) continue;
      lib.code_id = hex;
      lib.breakpad_id = elf::breakpad_id(id);
      if (said.insert(lib.path).second)
        problems.push_back({"Binary differs from the recorded one (build ID): " + lib.path, 1,
                            lib.path + " on this machine is not the binary perf recorded (build ID " + hex +
                                "): its functions are named only from a file with that build ID "
                                "(perf's build-ID cache, --symbol-dir, debuginfod)"});
    }
  report_quality(p, problems);
}

// The file a recorded binary is read from: its path while the file there has the build ID the file's table
// recorded, else its copy in perf's build-ID cache ("" for the path, also when there is none: the lib then
// keeps the recorded ID, check_build_ids).
class CachedBinaries {
 public:
  explicit CachedBinaries(const perf::DataFile& file) {
    for (const perf::BuildIdEntry& b : file.features.build_ids)
      if (!b.build_id.empty() && b.path.starts_with('/'))
        recorded_[b.path] = elf::hex(std::vector<uint8_t>(b.build_id.begin(), b.build_id.end()));
  }
  std::string operator()(const std::string& path) {
    auto it = recorded_.find(path);
    if (it == recorded_.end()) return {};
    auto [at, fresh] = found_.try_emplace(path);
    if (!fresh) return at->second;
    auto has_id = [&](const std::string& p) {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;  // a FIFO would block the open
      const auto id = elf::read_file(p);
      return id && elf::hex(id->build_id) == it->second;
    };
    if (has_id(path)) return {};
    for (const std::string& copy : elf::perf_cache_files(elf::default_perf_caches(), it->second, path))
      if (!copy.ends_with("/debug") && has_id(copy)) return at->second = copy;
    return {};
  }

 private:
  std::unordered_map<std::string, std::string> recorded_;  // path -> build ID (hex)
  std::unordered_map<std::string, std::string> found_;     // path -> the file read ("": the path)
};

// perf puts binaries in the build-ID table (ELF files); one naming another kind of file (/etc/shadow) is
// not a table perf wrote: the file is refused before anything of it is opened as a binary.
Status check_build_id_paths(const perf::DataFile& file) {
  for (const perf::BuildIdEntry& b : file.features.build_ids) {
    if (b.path.empty() || b.path[0] != '/' || b.path.ends_with(".map") ||
        b.path.find("/jit-") != std::string::npos)
      continue;
    UniqueFd fd(open(b.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    struct stat st {};
    if (!fd.valid() || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // gone: a line later
    char magic[4] = {};
    if (pread(fd.get(), magic, 4, 0) == 4 && std::memcmp(magic,
                                                         "\x7f"
                                                         "ELF",
                                                         4) == 0)
      continue;
    return Err("its build-ID table names " + b.path +
               ", which is not a binary (perf lists only ELF files there): refusing the file");
  }
  return {};
}

// The other events' samples (ImportOptions::event_tracks), per thread and event, made threads of their own
// after the recorded ones: "NAME (EVENT)", one sample per event sample with its stack.
class EventTracks {
 public:
  explicit EventTracks(const perf::DataFile& file) : file_(file) {}
  ProfileBuilder::EventSampleFn collector() {
    return [this](const SampleRecord& s, size_t proc, size_t thread, model::StackId stack) {
      samples_[{proc, thread, s.event}].push_back({s.time, stack, -1});
    };
  }
  // The threads added, (process, thread) each; the counts per event into `st`.
  std::vector<std::pair<size_t, size_t>> add_to(model::Profile& p, ImportStats& st) {
    std::vector<std::pair<size_t, size_t>> added;
    // As the critical-path tracks: each sample stands for one interval of the thread's activity graph.
    const int32_t cpu =
        model::saturate_cpu_delta(static_cast<int64_t>(std::max(p.meta.interval_ms, 0.001) * 1e6));
    std::map<uint32_t, uint64_t> counts;
    for (auto& [key, samples] : samples_) {
      const auto [proc, thread, event] = key;
      model::Process& process = p.processes[proc];
      const model::Thread& of = process.threads[thread];
      model::Thread t;
      t.tid = of.tid;
      t.name = of.name + " (" + file_.events[event].name + ")";
      t.start_ns = of.start_ns;
      t.end_ns = of.end_ns;
      for (model::Sample& smp : samples) smp.cpu_delta_ns = cpu;
      t.samples = std::move(samples);
      counts[event] += t.samples.size();
      process.threads.push_back(std::move(t));
      added.emplace_back(proc, process.threads.size() - 1);
    }
    for (const auto& [event, n] : counts) st.tracked.emplace_back(file_.events[event].name, n);
    return added;
  }

 private:
  const perf::DataFile& file_;
  std::map<std::tuple<size_t, size_t, uint32_t>, std::vector<model::Sample>> samples_;
};

// A perf.data file as a source (a row of driver/sources.h): its records that pass the filter, in the file's
// (time) order, in rounds of kRound (the builder releases stacks at each round's end; the file's records stay
// readable meanwhile). The scheduler's tracepoint samples become `record --off-cpu`'s records: a
// sched_switch is a switch-out sample (its stack) and, without perf's switch records, a switch out of prev
// and into next; a wakeup is a waking (waker.h), its waker the thread that ran it, in the records' order.
class PerfDataSource final : public Source {
 public:
  PerfDataSource(const perf::DataFile& file, const perf::Layout& layout, const Filter& filter,
                 const SchedEvents& sched)
      : file_(file), layout_(layout), filter_(filter), sched_(sched) {}
  uint64_t first() const { return first_; }
  uint64_t last() const { return last_; }
  uint64_t switch_ins() const { return switch_ins_; }

  bool next(Round& round, RecordSink&) override {
    constexpr size_t kRound = 1 << 14;
    size_t in_round = 0;
    for (; at_ < file_.records.size() && in_round < kRound; ++at_) {
      const perf::RecordAt& r = file_.records[at_];
      const perf::Record rec = perf::decode(r.h, layout_);
      if (!filter_.keep(rec)) continue;
      if (r.time) {
        if (!first_) first_ = r.time;
        last_ = std::max(last_, r.time);
      }
      if (!take(r, rec, round.records)) round.records.push_back({r.time, r.h, false});
      ++in_round;
    }
    return at_ < file_.records.size();
  }
  void release() override {
    typed_.clear();
    wakings_.clear();
  }

 private:
  // Whether `rec` was the scheduler's and is added (as what it stands for).
  bool take(const perf::RecordAt& r, const perf::Record& rec, std::vector<RecordRef>& out) {
    const auto* s = std::get_if<perf::SampleRecord>(&rec);
    if (const auto* c = std::get_if<perf::CommRecord>(&rec)) pid_of_[c->tid] = c->pid;
    if (const auto* f = std::get_if<perf::ForkRecord>(&rec)) pid_of_[f->tid] = f->pid;
    if (!s) return false;
    if (s->tid) pid_of_[s->tid] = s->pid;
    if (s->event == sched_.switch_event) {
      if (!switched(r, *s, out) && tracked(*s)) out.push_back({r.time, r.h, false});
      return true;
    }
    if (s->event != sched_.wakeup_event) return false;
    if (tracked(*s)) out.push_back({r.time, r.h, false});  // its track's sample (the waking is not one)
    if (const auto w = sched_.fields.sched_wakeup(s->raw)) {
      Waking& k = wakings_.emplace_back();
      k.time = s->time;
      k.waker_pid = s->pid;
      k.waker_tid = s->tid;
      k.wakee_tid = w->tid;
      k.wakee_pid = pid_of_.count(w->tid) ? pid_of_[w->tid] : 0;
      k.flags = w->interrupt || s->tid == 0 ? kWakeInterrupt : 0;
      // The sample: the waker's stack (ProfileBuilder::on_waking); an interrupt's is the task it hit.
      RecordRef ref{r.time, k.flags ? nullptr : r.h, false};
      ref.waking = &k;
      out.push_back(ref);
    }
    return true;
  }

  // A tracepoint sample that is another event's (its track's): the filter kept it for that.
  bool tracked(const perf::SampleRecord& s) const { return filter_.all_events && s.event != filter_.event; }

  // Whether the sample itself went to the builder (as a switch-out's, whose track takes it too).
  bool switched(const perf::RecordAt& r, const perf::SampleRecord& s, std::vector<RecordRef>& out) {
    const auto sw = sched_.fields.sched_switch(s.raw);
    if (!sw) return false;
    if (sw->prev_tid) out.push_back({r.time, r.h, true});  // the switch-out's stack, for its wait
    if (sched_.switch_records) return sw->prev_tid != 0;   // perf's own switch records time the waits
    if (sw->prev_tid) add(out, r.time, SwitchRecord{s.pid, sw->prev_tid, s.time, true, sw->preempted});
    if (sw->next_tid && pid_of_.count(sw->next_tid)) {
      add(out, r.time, SwitchRecord{pid_of_[sw->next_tid], sw->next_tid, s.time, false, false});
      ++switch_ins_;
    }
    return sw->prev_tid != 0;
  }
  void add(std::vector<RecordRef>& out, uint64_t time, perf::Record rec) {
    RecordRef ref{time, nullptr, false};
    ref.typed = &typed_.emplace_back(std::move(rec));
    out.push_back(ref);
  }

  const perf::DataFile& file_;
  const perf::Layout& layout_;
  const Filter& filter_;
  const SchedEvents& sched_;
  size_t at_ = 0;
  uint64_t first_ = 0, last_ = 0, switch_ins_ = 0;
  std::unordered_map<uint32_t, uint32_t> pid_of_;  // tid -> pid, from the records seen so far
  std::deque<perf::Record> typed_;                 // this round's records made of tracepoints
  std::deque<Waking> wakings_;                     // and its wakeups
};

}  // namespace

Result<Imported> import_perf_data(const perf::DataFile& file, const ImportOptions& o) {
  Imported out;
  ImportStats& st = out.stats;
  if (Status s = check_build_id_paths(file); !s) return std::move(s).take_error();
  const SchedEvents sched(file);
  auto chosen = choose_event(file, o, sched, st);
  if (!chosen) return std::move(chosen).take_error();
  const perf_event_attr& attr = file.events[chosen->value_or(*sched.switch_event)].attr;
  st.dwarf = (attr.sample_type & PERF_SAMPLE_REGS_USER) && (attr.sample_type & PERF_SAMPLE_STACK_USER);
  st.out_of_order = file.out_of_order;
  st.dropped = file.dropped;
  st.kernel_names = recorded_on_this_kernel(file.features);

  model::Profile& profile = out.profile;
  describe(file, attr, profile);
  EventConfig events;
  events.dwarf = st.dwarf;
  events.regs_mask = user_regs_mask();
  std::unique_ptr<Unwinder> unwinder;
  if (st.dwarf) {
    elf::LocatorOptions locator;
    locator.symbol_dirs = o.symbol_dirs;
    unwinder = std::make_unique<Unwinder>(std::move(locator));
  }
  FileProcfs procfs(file, st.kernel_names);
  ProfileBuilder builder(profile, unwinder.get(), events, procfs);
  CachedBinaries cached(file);
  builder.read_binaries_from(std::ref(cached));
  perf::Layout layout = file.layout;
  layout.unwind_regs = events.regs_mask;
  builder.set_layout(layout);
  bool switches = sched.switch_event.has_value();  // sched:sched_switch, or perf record --switch-events
  for (const auto& e : file.events) switches |= e.attr.context_switch != 0;
  if (!switches) {
    std::vector<bool> clock(file.events.size());
    for (size_t e = 0; e < clock.size(); ++e) {
      const perf_event_attr& a = file.events[e].attr;
      clock[e] = a.type == PERF_TYPE_SOFTWARE &&
                 (a.config == PERF_COUNT_SW_CPU_CLOCK || a.config == PERF_COUNT_SW_TASK_CLOCK);
    }
    builder.set_cpu_from_period(std::move(clock));
  }

  Filter filter;
  filter.event = *chosen;
  filter.sched = &sched;
  filter.pids.insert(o.pids.begin(), o.pids.end());
  filter.tids.insert(o.tids.begin(), o.tids.end());
  filter.start = o.start_ns.value_or(0);
  filter.end = o.end_ns.value_or(~uint64_t{0});
  if (sched.switch_event) {  // off-CPU spans, as `record --off-cpu` makes them
    OffCpuConfig oc;
    oc.spans = true;
    oc.stacks = sched.stacks;
    oc.interval_ns = static_cast<uint64_t>(std::max(profile.meta.interval_ms, 0.001) * 1e6);
    builder.set_off_cpu(oc);
  }
  filter.all_events = o.event_tracks;
  EventTracks tracks(file);
  if (o.event_tracks) builder.set_event_samples(*chosen, tracks.collector());
  PerfDataSource source(file, layout, filter, sched);
  Driver driver(builder);
  driver.add(source);
  driver.run();
  const uint64_t first = source.first(), last = source.last();
  driver.end(last);
  profile.meta.start_monotonic_ns = first;
  profile.meta.end_monotonic_ns = last;
  out.tracks = tracks.add_to(profile, st);
  check_build_ids(file, profile);

  st.samples = builder.samples();
  st.off_cpu_samples = builder.off_cpu_samples();
  st.off_cpu_spans = builder.off_cpu_spans();
  st.switch_outs = builder.switch_samples();
  st.switch_ins = source.switch_ins();
  st.switch_records = sched.switch_records;
  st.lost_records = builder.lost();
  st.processes = static_cast<uint32_t>(profile.processes.size());
  for (const model::Process& p : profile.processes) st.threads += static_cast<uint32_t>(p.threads.size());
  st.threads -= static_cast<uint32_t>(out.tracks.size());  // the other events' tracks are none of them
  st.duration_s = static_cast<double>(last - first) / 1e9;
  if (unwinder) {
    const UnwindStats& u = unwinder->stats();
    profile.meta.stack_walk =
        model::Meta::StackWalk{u.stacks, u.truncated, u.failed, u.fp_stacks, u.scanned_stacks};
  }
  if (st.samples + st.off_cpu_samples + st.off_cpu_spans + out.tracks.size() == 0)
    return Err("no samples left to import" +
               std::string(o.pids.empty() && o.tids.empty() && !o.start_ns && !o.end_ns
                               ? ""
                               : " (the --pid, --tid and --time-range filters left none)"));
  return out;
}

Status parse_time_range(const std::string& text, ImportOptions& o) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos) return Err("--time-range: START,END in seconds (either may be empty)");
  auto seconds = [](const std::string& s, std::optional<uint64_t>& into) {
    if (s.empty()) return true;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !(v >= 0) || v > 1e10) return false;
    into = static_cast<uint64_t>(v * 1e9 + 0.5);
    return true;
  };
  if (!seconds(text.substr(0, comma), o.start_ns) || !seconds(text.substr(comma + 1), o.end_ns))
    return Err("--time-range: '" + text + "' is not START,END in seconds");
  return {};
}

}  // namespace fxprof::recorder
