#include "gecko/gecko.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "model/markers.h"
#include "model/symbols.h"

namespace fxprof::gecko {
namespace {

using model::Process;
using model::Profile;
using model::StackId;
using model::Thread;

// ms since `origin_ns`, rounded to 0.1 µs so numbers stay short.
double rel_ms(uint64_t t_ns, uint64_t origin_ns) {
  double ms = (static_cast<double>(t_ns) - static_cast<double>(origin_ns)) / 1e6;
  return std::round(ms * 1e4) / 1e4;
}

// The same to the microsecond (allocation events: shorter numbers where there are millions of them).
double rel_ms_us(uint64_t t_ns, uint64_t origin_ns) {
  double ms = (static_cast<double>(t_ns) - static_cast<double>(origin_ns)) / 1e6;
  return std::round(ms * 1e3) / 1e3;
}

// Per-thread string table (Gecko strings are per thread).
class LocalStrings {
 public:
  uint32_t intern(std::string_view s) {
    auto [it, inserted] = index_.try_emplace(std::string(s), static_cast<uint32_t>(list_.size()));
    if (inserted) list_.push_back(&it->first);
    return it->second;
  }
  void write(JsonWriter& w) const {
    w.begin_array();
    for (const std::string* s : list_) w.value(*s);
    w.end_array();
  }

 private:
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<const std::string*> list_;
};

// An id of the profile's tables (a stack, a frame) -> its index in the thread's: dense over the profile's
// ids for a thread that uses many of them (a full-mode heap profile's thread: 1M stacks, where a hash map's
// lookups were a third of the JSON's time), a hash map otherwise (many threads each using a few).
class LocalIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  LocalIndex(size_t ids, size_t uses) : dense_(uses * 8 >= ids) {
    if (dense_) dense_index_.assign(ids, kNone);
  }
  uint32_t get(uint32_t id) const {  // kNone when absent
    if (dense_) return dense_index_[id];
    auto it = hashed_.find(id);
    return it == hashed_.end() ? kNone : it->second;
  }
  uint32_t at(uint32_t id) const {
    const uint32_t i = get(id);
    if (i == kNone) throw std::out_of_range("gecko: an id outside the thread's table");
    return i;
  }
  void set(uint32_t id, uint32_t index) {
    if (dense_)
      dense_index_[id] = index;
    else
      hashed_[id] = index;
  }
  // The ids set so far, in increasing order (dense: one pass, where sorting 1M ids took longer).
  std::vector<uint32_t> ids() const {
    std::vector<uint32_t> out;
    if (dense_) {
      for (uint32_t id = 0; id < dense_index_.size(); ++id)
        if (dense_index_[id] != kNone) out.push_back(id);
    } else {
      for (const auto& [id, index] : hashed_) out.push_back(id);
      std::sort(out.begin(), out.end());
    }
    return out;
  }

 private:
  bool dense_;
  std::vector<uint32_t> dense_index_;
  std::unordered_map<uint32_t, uint32_t> hashed_;
};

std::string_view binary_label(const Profile& p, model::BinaryId b) {
  const model::Binary& bin = p.binaries[b];
  return !bin.name.empty() ? std::string_view(bin.name) : std::string_view(bin.debug_name);
}

std::string frame_location(const Profile& p, const model::Frame& f) {
  char buf[32];
  switch (f.kind) {
    case model::FrameKind::Native:
      if (f.binary != model::kNoBinary) {
        // "func (in lib)" (pre-symbolicated, format doc 1.6), or "0x<relative> (in lib)" for an address no
        // symbols named: the front end shows it as it is (it starts with 0x but is no number, so it is never
        // located in the absolute-address libs), and it is the same in every process and run.
        std::string out;
        if (f.name != model::kNoString) {
          out = p.strings.get(f.name);
        } else {
          std::snprintf(buf, sizeof buf, "0x%" PRIx64, f.address);
          out = buf;
        }
        out += " (in ";
        out += binary_label(p, f.binary);
        out += ')';
        return out;
      }
      std::snprintf(buf, sizeof buf, "0x%" PRIx64, f.address);
      return buf;
    case model::FrameKind::Kernel:
      if (f.name != model::kNoString) return std::string(p.strings.get(f.name)) + " (in [kernel.kallsyms])";
      std::snprintf(buf, sizeof buf, "0x%" PRIx64, f.address);
      return buf;
    case model::FrameKind::Label:
      return f.name != model::kNoString ? std::string(p.strings.get(f.name)) : std::string("(unknown)");
  }
  return {};
}

void write_categories(const Profile& p, JsonWriter& w) {
  w.begin_array();
  for (const auto& c : p.meta.categories) {
    w.begin_object().key("name").value(c.name).key("color").value(c.color);
    w.key("subcategories").begin_array().value("Other").end_array().end_object();
  }
  w.end_array();
}

void write_marker_schema(const Profile& p, JsonWriter& w) {
  w.begin_array();
  for (const auto& s : p.meta.marker_schemas) {
    w.begin_object().key("name").value(s.name);
    w.key("display").begin_array();
    for (const auto& d : s.display) w.value(d);
    w.end_array();
    if (!s.chart_label.empty()) w.key("chartLabel").value(s.chart_label);
    if (!s.tooltip_label.empty()) w.key("tooltipLabel").value(s.tooltip_label);
    if (!s.table_label.empty()) w.key("tableLabel").value(s.table_label);
    w.key("data").begin_array();
    for (const auto& f : s.fields)
      w.begin_object()
          .key("key")
          .value(f.key)
          .key("label")
          .value(f.label)
          .key("format")
          .value(f.format)
          .end_object();
    w.end_array();
    w.end_object();
  }
  w.end_array();
}

// The Profile Info panel's extra sections: how stacks were walked, and the data-quality lines.
void write_extra(const Profile& p, JsonWriter& w) {
  const auto& sw = p.meta.stack_walk;
  if (!sw && p.meta.data_quality.empty()) return;
  auto entry = [&](std::string_view label, uint64_t v) {
    w.begin_object()
        .key("label")
        .value(label)
        .key("format")
        .value("integer")
        .key("value")
        .value(v)
        .end_object();
  };
  w.key("extra").begin_array();
  if (sw) {
    w.begin_object().key("label").value("Stack walking").key("entries").begin_array();
    entry("Stacks unwound (DWARF)", sw->stacks);
    entry("Ended at the end of the stack copy", sw->truncated);
    entry("Failed (no unwind information)", sw->failed);
    entry(kStackWalkFramePointer, sw->frame_pointer);
    entry(kStackWalkScanned, sw->scanned);
    w.end_array().end_object();
  }
  if (!p.meta.data_quality.empty()) {
    w.begin_object().key("label").value(kDataQuality).key("entries").begin_array();
    for (const model::Meta::Problem& q : p.meta.data_quality) entry(q.label, q.count);
    w.end_array().end_object();
  }
  w.end_array();
}

// The heap's figures, fxprof's own key (the front end copies meta field by field): mode, rate, temporary
// allocations, the peak and the sizes' histogram.
void write_heap_meta(const model::Meta::HeapStats& h, uint64_t origin, JsonWriter& w) {
  w.key("fxprofHeap").begin_object();
  w.key("mode").value(h.sampled ? "sampled" : "full").key("rate").value(h.rate_bytes);
  w.key("temporary").value(h.temporary).key("peakBytes").value(h.peak_bytes);
  if (h.sampled) w.key("temporaryError").value(h.temporary_error);
  w.key("peakTime").value(rel_ms(h.peak_time_ns, origin));
  w.key("sizes").begin_array();
  for (const auto& b : h.sizes) w.begin_array().value(b.max_size).value(b.count).value(b.bytes).end_array();
  w.end_array().end_object();
}

void write_meta(const Profile& p, const Process* proc, bool top, gecko::Synthetic synthetic, JsonWriter& w) {
  const uint64_t origin = proc ? proc->start_ns : p.meta.start_monotonic_ns;
  const double start_unix = p.meta.start_unix_ms + rel_ms(origin, p.meta.start_monotonic_ns);
  w.key("meta").begin_object();
  w.key("version").value(kGeckoVersion);
  w.key("startTime").value(start_unix);
  w.key("startTimeAsClockMonotonicNanosecondsSinceBoot").value(origin);
  w.key("shutdownTime");
  if (proc && proc->end_ns)
    w.value(rel_ms(*proc->end_ns, origin));
  else
    w.null();
  w.key("interval").value(p.meta.interval_ms);
  w.key("processType").value(0);
  w.key("product").value(p.meta.product);
  w.key("stackwalk").value(1);
  w.key("debug").value(0);
  w.key("gcpoison").value(0);
  w.key("asyncstack").value(0);
  w.key("platform").value("Linux");
  if (!p.meta.oscpu.empty()) w.key("oscpu").value(p.meta.oscpu);
  if (top) {  // the machine: the front end shows the first four in Profile Info (the others it drops today)
    const model::Meta::Machine& m = p.meta.machine;
    if (!m.cpu_name.empty()) w.key("CPUName").value(m.cpu_name);
    if (m.physical_cpus) w.key("physicalCPUs").value(m.physical_cpus);
    if (m.logical_cpus) w.key("logicalCPUs").value(m.logical_cpus);
    if (m.main_memory) w.key("mainMemory").value(m.main_memory);
    if (!m.command_line.empty()) w.key("arguments").value(m.command_line);
  }
  w.key("presymbolicated").value(p.meta.presymbolicated);
  // The busiest thread (the printed URL's thread=N), for `fxprof load`, which serves without reading samples.
  if (top)
    if (auto busiest = gecko_busiest_thread(p, synthetic))
      w.key("fxprofSelectedThread").value(uint64_t{*busiest});
  if (top) write_extra(p, w);
  w.key("categories");
  write_categories(p, w);
  w.key("markerSchema");
  write_marker_schema(p, w);
  w.key("sampleUnits").begin_object();
  w.key("time").value("ms").key("eventDelay").value("ms").key("threadCPUDelta").value("µs");
  w.end_object();
  if (top) {
    w.key("profilingStartTime").value(0.0);
    if (p.meta.end_monotonic_ns) w.key("profilingEndTime").value(rel_ms(*p.meta.end_monotonic_ns, origin));
    if (p.meta.heap) write_heap_meta(*p.meta.heap, origin, w);  // fxprof's own key
  }
  w.end_object();
}

// The one place the Gecko `libs` schema is written (format doc 1.4).
void write_libs(const Process* proc, JsonWriter& w) {
  w.key("libs").begin_array();
  if (proc) {
    for (const model::Lib* l : model::disjoint_libs(*proc)) {
      w.begin_object();
      w.key("start").value(l->start).key("end").value(l->end).key("offset").value(l->offset);
      w.key("name").value(l->name).key("path").value(l->path);
      w.key("debugName").value(l->debug_name).key("debugPath").value(l->debug_path);
      w.key("breakpadId").value(l->breakpad_id).key("codeId").value(l->code_id);
      w.key("arch").value(l->arch);
      w.end_object();
    }
  }
  w.end_array();
}

void write_marker_payload(const Profile& p, const model::Marker& m, uint64_t origin,
                          const LocalIndex& stack_index, JsonWriter& w) {
  if (m.type == model::kNoString && m.stack == model::kNoStack) {
    w.null();
    return;
  }
  w.begin_object();
  if (m.type != model::kNoString) w.key("type").value(p.strings.get(m.type));
  if (m.program) w.key(model::kProgramMarkerKey).value(1);
  if (m.stack != model::kNoStack) {  // the backtrace, as Gecko carries it: a one-sample samples table
    w.key("stack").begin_object().key("samples").begin_object();
    w.key("schema").begin_object().key("stack").value(0).key("time").value(1).end_object();
    w.key("data")
        .begin_array()
        .begin_array()
        .value(stack_index.at(m.stack))
        .value(rel_ms(m.start_ns, origin));
    w.end_array().end_array().end_object().end_object();
  }
  for (const auto& f : m.fields) {
    w.key(p.strings.get(f.key));
    if (f.is_string)
      w.value(f.string == model::kNoString ? std::string_view() : p.strings.get(f.string));
    else
      w.value(f.number);
  }
  w.end_object();
}

// The pid as the front end sees it, and whether a later process entry has the same pid (the program an
// exec started: exec gives the pid a new entry). The front end groups threads by pid under the track of the
// pid's "GeckoMain" thread, labelled with its processName and "PID: N": so every entry of a pid is written
// with the real pid, and only the last one's main thread is "GeckoMain"; an earlier one's main thread is
// kBeforeExec-suffixed and shows as a thread track under the process the exec made (the front end would
// otherwise show one of two main threads nowhere). Its counters go with it (the front end keeps only those
// of an entry with a "GeckoMain"; fxprof's reader keeps all).
struct PidLabel {
  uint32_t pid = 0;
  bool superseded = false;
  void write(JsonWriter& w) const { w.value(pid); }
};

// A thread's own tables: the stacks it uses, closed under prefixes, in increasing global order
// (topological), the frames they use, and its strings (Gecko's tables are per thread).
struct ThreadTables {
  ThreadTables(const Profile& p, const Thread& t)
      : stacks(p.stacks.size(), t.samples.size() + t.markers.size() + t.allocations.size()),
        frame_index(p.frames.size(), 0) {
    auto use = [&](StackId leaf) {
      for (StackId id = leaf; id != model::kNoStack && stacks.get(id) == LocalIndex::kNone;
           id = p.stacks.prefix(id))
        stacks.set(id, 0);
    };
    for (const auto& s : t.samples) use(s.stack);
    for (const auto& m : t.markers) use(m.stack);
    for (const auto& a : t.allocations) use(a.stack);
    used = stacks.ids();
    for (uint32_t i = 0; i < used.size(); ++i) stacks.set(used[i], i);
    frame_index = LocalIndex(p.frames.size(), used.size());
    for (StackId s : used) {
      model::FrameId f = p.stacks.frame(s);
      if (frame_index.get(f) == LocalIndex::kNone) {
        frame_index.set(f, static_cast<uint32_t>(frames.size()));
        frames.push_back(f);
      }
    }
  }
  LocalIndex stacks;  // global stack id -> the thread's
  std::vector<StackId> used;
  LocalIndex frame_index;  // global frame id -> the thread's
  std::vector<model::FrameId> frames;
  LocalStrings strings;
};

void write_thread_head(const Process& proc, PidLabel pid, const Thread& t, bool synthetic, JsonWriter& w) {
  if (t.is_main && pid.superseded)
    w.key("name").value(proc.name + std::string(gecko::kBeforeExec));
  else if (t.is_main)
    w.key("name").value("GeckoMain");
  else if (t.name == proc.name || t.name == std::string_view(proc.name).substr(0, proc.name.find(' ')))
    w.key("name").value(t.name + std::string(gecko::kTidSuffix) + std::to_string(t.tid) + ")");
  else
    w.key("name").value(t.name);
  w.key("processName").value(proc.name);
  w.key("processType").value("default");
  w.key("pid");
  pid.write(w);
  w.key("tid").value(t.tid);
  if (synthetic) w.key(gecko::kSyntheticKey).value(true);
  w.key("registerTime").value(rel_ms(std::max(t.start_ns, proc.start_ns), proc.start_ns));
  w.key("unregisterTime");
  if (t.end_ns)
    w.value(rel_ms(std::max(*t.end_ns, proc.start_ns), proc.start_ns));
  else
    w.null();
}

// Samples, sorted by time.
void write_samples(const Process& proc, const Thread& t, const ThreadTables& tt, JsonWriter& w) {
  std::vector<uint32_t> order(t.samples.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return t.samples[a].time_ns < t.samples[b].time_ns; });
  w.key("samples").begin_object();
  w.key("schema").begin_object().key("stack").value(0).key("time").value(1).key("eventDelay").value(2);
  w.key("threadCPUDelta").value(3).end_object();
  w.key("data").begin_array();
  for (uint32_t i : order) {
    const auto& s = t.samples[i];
    w.begin_array();
    if (s.stack == model::kNoStack)
      w.null();
    else
      w.value(tt.stacks.at(s.stack));
    w.value(rel_ms(s.time_ns, proc.start_ns)).value(0);
    if (s.cpu_delta_ns < 0)
      w.null();
    else
      w.value(static_cast<int64_t>(s.cpu_delta_ns / 1000));
    w.end_array();
  }
  w.end_array().end_object();
}

// Heap events: `Native allocation` markers become the thread's native allocations table on import. They
// are most of a heap profile (1M full-mode allocations are 2M of them), so each carries only what the front
// end reads (format doc 1.9a): its time (to the microsecond: the 0.1 us digit cost a byte an event
// gzipped), size, memoryAddress, threadId, and a stack whose samples table has only the `stack` column (the
// front end takes the first sample's stack and nothing else from it). Before: ~395 bytes an event, 21.8 MB
// .json.gz for 1M malloc+free; now ~165 bytes, 8.1 MB.
void write_allocations(const Process& proc, const Thread& t, ThreadTables& tt, JsonWriter& w) {
  const uint32_t name_index = t.allocations.empty() ? 0 : tt.strings.intern("Native allocation");
  for (const auto& a : t.allocations) {
    w.begin_array().value(name_index).value(rel_ms_us(a.time_ns, proc.start_ns)).null().value(0).value(0);
    w.begin_object().key("type").value("Native allocation").key("size").value(a.bytes);
    w.key("memoryAddress").value(a.address).key("threadId").value(a.tid);
    if (a.count != 1) w.key("count").value(a.count);  // read back by our reader; the front end ignores it
    if (a.at_peak) w.key("atPeak").value(1);
    w.key("stack").begin_object().key("samples").begin_object();
    w.key("schema").begin_object().key("stack").value(0).end_object();
    w.key("data").begin_array().begin_array();
    if (a.stack == model::kNoStack)
      w.null();
    else
      w.value(tt.stacks.at(a.stack));
    w.end_array().end_array().end_object().end_object();
    w.end_object().end_array();
  }
}

// Markers, then the heap events (markers too, to the front end).
void write_markers(const Profile& p, const Process& proc, const Thread& t, ThreadTables& tt, JsonWriter& w) {
  w.key("markers").begin_object();
  w.key("schema").begin_object().key("name").value(0).key("startTime").value(1).key("endTime").value(2);
  w.key("phase").value(3).key("category").value(4).key("data").value(5).end_object();
  w.key("data").begin_array();
  for (const auto& m : t.markers) {
    w.begin_array();
    w.value(
        tt.strings.intern(m.name == model::kNoString ? std::string_view("marker") : p.strings.get(m.name)));
    bool has_start = m.phase != model::MarkerPhase::IntervalEnd;
    bool has_end = m.phase == model::MarkerPhase::Interval || m.phase == model::MarkerPhase::IntervalEnd;
    if (has_start)
      w.value(rel_ms(m.start_ns, proc.start_ns));
    else
      w.null();
    if (has_end)
      w.value(rel_ms(m.phase == model::MarkerPhase::IntervalEnd ? m.start_ns : m.end_ns, proc.start_ns));
    else
      w.null();
    w.value(static_cast<int>(m.phase)).value(static_cast<int>(m.category));
    write_marker_payload(p, m, proc.start_ns, tt.stacks, w);
    w.end_array();
  }
  write_allocations(proc, t, tt, w);
  w.end_array().end_object();
}

void write_stack_table(const Profile& p, const ThreadTables& tt, JsonWriter& w) {
  w.key("stackTable").begin_object();
  w.key("schema").begin_object().key("prefix").value(0).key("frame").value(1).end_object();
  w.key("data").begin_array();
  for (StackId s : tt.used) {
    w.begin_array();
    StackId prefix = p.stacks.prefix(s);
    if (prefix == model::kNoStack)
      w.null();
    else
      w.value(tt.stacks.at(prefix));
    w.value(tt.frame_index.at(p.stacks.frame(s)));
    w.end_array();
  }
  w.end_array().end_object();
}

void write_frame_table(const Profile& p, ThreadTables& tt, JsonWriter& w) {
  w.key("frameTable").begin_object();
  w.key("schema").begin_object();
  w.key("location").value(0).key("relevantForJS").value(1).key("innerWindowID").value(2);
  w.key("implementation").value(3).key("line").value(4).key("column").value(5);
  w.key("category").value(6).key("subcategory").value(7);
  // Ours, ignored by the front end (it maps columns by schema): what Gecko cannot carry for a native frame
  // (its file, its inline depth, its binary-relative address), so that our reader gets the model back.
  w.key(kFileColumn).value(8).key(kInlineDepthColumn).value(9).key(kAddressColumn).value(10).end_object();
  w.key("data").begin_array();
  for (model::FrameId fid : tt.frames) {
    const auto& f = p.frames.get(fid);
    const bool in_binary = f.kind == model::FrameKind::Native && f.binary != model::kNoBinary;
    w.begin_array();
    w.value(tt.strings.intern(frame_location(p, f))).value(false).value(0).null();
    if (f.line > 0)
      w.value(f.line);
    else
      w.null();
    w.null();
    w.value(static_cast<int>(f.category)).value(0);
    if (f.file != model::kNoString)
      w.value(tt.strings.intern(p.strings.get(f.file)));
    else
      w.null();
    w.value(static_cast<unsigned>(f.inline_depth));
    if (in_binary)
      w.value(f.address);
    else
      w.null();
    w.end_array();
  }
  w.end_array().end_object();
}

// One thread's object: its head, samples, markers, stack and frame tables, then the strings they interned
// (in that order: the string indices follow it).
void write_thread(const Profile& p, const Process& proc, PidLabel pid, const Thread& t, bool synthetic,
                  JsonWriter& w) {
  ThreadTables tt(p, t);
  w.begin_object();
  write_thread_head(proc, pid, t, synthetic, w);
  write_samples(proc, t, tt, w);
  write_markers(p, proc, t, tt, w);
  write_stack_table(p, tt, w);
  write_frame_table(p, tt, w);
  w.key("stringTable");
  tt.strings.write(w);
  w.end_object();
}

// The order a process's threads are written in: the main thread first, then by start time and tid.
std::vector<const Thread*> written_order(const Process& proc) {
  std::vector<const Thread*> threads;
  for (const auto& t : proc.threads) threads.push_back(&t);
  std::stable_sort(threads.begin(), threads.end(), [](const Thread* a, const Thread* b) {
    if (a->is_main != b->is_main) return a->is_main;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->tid < b->tid;
  });
  return threads;
}

// The recorded threads of processes[index], then its synthetic ones.
void write_threads(const Profile& p, size_t index, PidLabel pid, gecko::Synthetic synthetic, JsonWriter& w) {
  w.key("threads").begin_array();
  if (index < p.processes.size()) {
    const Process& proc = p.processes[index];
    for (const Thread* t : written_order(proc)) write_thread(p, proc, pid, *t, false, w);
    for (const model::SyntheticThread& t : synthetic)
      if (t.process == index) write_thread(p, proc, pid, t.thread, true, w);
  }
  w.end_array();
}

// Counters of one process (Gecko `counters`: times in ms since the process start, `count` the change).
void write_counters(const Process* proc, JsonWriter& w) {
  w.key("counters").begin_array();
  if (proc) {
    for (const auto& c : proc->counters) {
      w.begin_object().key("name").value(c.name).key("category").value(c.category);
      w.key("description").value(c.description);
      // A counter that counts no operations (RSS) has no `number` column: with one, the front end's memory
      // tooltip says "0 allocations and deallocations since the previous sample".
      const bool numbered = std::any_of(c.samples.begin(), c.samples.end(),
                                        [](const model::CounterSample& s) { return s.count != 0; });
      w.key("samples").begin_object().key("schema").begin_object().key("time").value(0).key("count").value(1);
      if (numbered) w.key("number").value(2);
      w.end_object().key("data").begin_array();
      for (const auto& s : c.samples) {
        w.begin_array().value(rel_ms(s.time_ns, proc->start_ns)).value(s.delta);
        if (numbered) w.value(s.count);
        w.end_array();
      }
      w.end_array().end_object().end_object();
    }
  }
  w.end_array();
}

void write_empty_extras(JsonWriter& w) {
  w.key("pausedRanges").begin_array().end_array();
  w.key("sources").begin_object();
  w.key("schema").begin_object().key("id").value(0).key("filename").value(1).key("startLine").value(2);
  w.key("startColumn").value(3).key("sourceMapURL").value(4).end_object();
  w.key("data").begin_array().end_array().end_object();
}

}  // namespace

void write_gecko(const Profile& p, JsonWriter& w, Synthetic synthetic) {
  std::vector<PidLabel> pids;
  std::unordered_map<uint32_t, size_t> last;  // pid -> its last entry
  for (size_t i = 0; i < p.processes.size(); ++i) last[p.processes[i].pid] = i;
  for (size_t i = 0; i < p.processes.size(); ++i)
    pids.push_back({p.processes[i].pid, last[p.processes[i].pid] != i});

  const Process* top = p.processes.empty() ? nullptr : &p.processes[0];
  w.begin_object();
  write_meta(p, top, true, synthetic, w);
  write_libs(top, w);
  write_threads(p, 0, top ? pids[0] : PidLabel{}, synthetic, w);
  write_counters(top, w);
  w.key("processes").begin_array();
  for (size_t i = 1; i < p.processes.size(); ++i) {
    const Process& proc = p.processes[i];
    w.begin_object();
    write_meta(p, &proc, false, synthetic, w);
    write_libs(&proc, w);
    write_threads(p, i, pids[i], synthetic, w);
    write_counters(&proc, w);
    w.key("processes").begin_array().end_array();
    write_empty_extras(w);
    w.end_object();
  }
  w.end_array();
  write_empty_extras(w);
  w.end_object();
}

std::optional<size_t> gecko_busiest_thread(const Profile& profile, Synthetic synthetic) {
  std::optional<size_t> best;
  int64_t best_cpu = -1;
  size_t best_samples = 0, index = 0;
  // processes[0]'s threads are the top level's; the others follow in the order of `processes`.
  for (size_t pi = 0; pi < profile.processes.size(); ++pi) {
    const Process& proc = profile.processes[pi];
    for (const Thread* t : written_order(proc)) {
      int64_t cpu = 0;
      for (const model::Sample& s : t->samples) cpu += std::max<int64_t>(s.cpu_delta_ns, 0);
      if (!best || cpu > best_cpu || (cpu == best_cpu && t->samples.size() > best_samples)) {
        best = index;
        best_cpu = cpu;
        best_samples = t->samples.size();
      }
      ++index;
    }
    // Its synthetic threads follow (made from the others: never the thread a URL opens on).
    index +=
        static_cast<size_t>(std::count_if(synthetic.begin(), synthetic.end(),
                                          [&](const model::SyntheticThread& t) { return t.process == pi; }));
  }
  return best;
}

std::string url_uint(uint64_t value) {
  // The front end's uintarray encoding (src/utils/uintarray-encoding.ts): sextets, most significant first,
  // 5 value bits each, the continuation bit set on all but the last. "12" would be the threads 1 and 2.
  static constexpr std::string_view kDigits =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._";
  std::string r(1, kDigits[value & 31]);
  for (value >>= 5; value != 0; value >>= 5) r.insert(r.begin(), kDigits[32 + (value & 31)]);
  return r;
}

std::string view_query_for_thread(uint64_t thread) {
  // `v` says which URL version the query is written in: without it the front end reads version 0, where
  // `thread` was a decimal number ("g" is NaN: thread 0). `thread` is in the uintarray encoding since version
  // 6 (src/app-logic/url-handling.ts, upgrader 6); version 7 made an absent timelineType the default graph
  // (upgrader 7 sets "category" on older URLs); no later upgrader changes a query of `thread` and
  // `symbolServer`. Not the newest version (17 at df31314e): a front end older than the URL refuses it.
  return "v=7&thread=" + url_uint(thread);
}

std::string file_view_query(const Profile& read_back) {
  if (read_back.meta.selected_thread) return view_query_for_thread(*read_back.meta.selected_thread);
  return gecko_view_query(read_back);
}

std::string gecko_view_query(const Profile& profile, Synthetic synthetic) {
  const std::optional<size_t> thread = gecko_busiest_thread(profile, synthetic);
  return thread ? view_query_for_thread(*thread) : std::string();
}

Status write_gecko_profile(const Profile& profile, const std::string& path, Synthetic synthetic) {
  auto out = sinks::OutputFile::create(path);
  if (!out) return std::move(out).take_error();
  return write_gecko_profile(profile, **out, synthetic);
}

Status write_gecko_profile(const Profile& profile, sinks::OutputFile& out, Synthetic synthetic) {
  {
    JsonWriter w(out);
    write_gecko(profile, w, synthetic);
    w.flush();
  }
  return out.finish();
}

}  // namespace fxprof::gecko
