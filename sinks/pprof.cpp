#include "sinks/pprof.h"

#include <protozero/pbf_writer.hpp>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/markers.h"
#include "model/symbols.h"
#include "sinks/functions.h"
#include "sinks/output.h"

namespace fxprof::sinks {
namespace {

// Field numbers of perftools.profiles (profile.proto).
namespace pb {
enum Profile : protozero::pbf_tag_type {
  kSampleType = 1,
  kSample = 2,
  kMapping = 3,
  kLocation = 4,
  kFunction = 5,
  kStringTable = 6,
  kTimeNanos = 9,
  kDurationNanos = 10,
  kPeriodType = 11,
  kPeriod = 12,
  kComment = 13,
  kDefaultSampleType = 14,
};
enum ValueType : protozero::pbf_tag_type { kType = 1, kUnit = 2 };
enum Sample : protozero::pbf_tag_type { kLocationId = 1, kValue = 2, kLabel = 3 };
enum Label : protozero::pbf_tag_type { kKey = 1, kStr = 2, kNum = 3 };
enum Mapping : protozero::pbf_tag_type {
  kMapId = 1,
  kMemoryStart = 2,
  kMemoryLimit = 3,
  kFileOffset = 4,
  kFilename = 5,
  kBuildId = 6,
  kHasFunctions = 7,
  kHasFilenames = 8,
  kHasLineNumbers = 9,
  kHasInlineFrames = 10,
};
enum Location : protozero::pbf_tag_type { kLocId = 1, kMappingId = 2, kAddress = 3, kLine = 4 };
enum Line : protozero::pbf_tag_type { kFunctionId = 1, kLineNumber = 2 };
enum Function : protozero::pbf_tag_type {
  kFnId = 1,
  kName = 2,
  kSystemName = 3,
  kFnFilename = 4,
  kStartLine = 5
};
}  // namespace pb

class Strings {
 public:
  Strings() { intern(""); }
  int64_t intern(std::string_view s) {
    auto it = index_.find(s);
    if (it != index_.end()) return it->second;
    auto id = static_cast<int64_t>(list_.size());
    list_.emplace_back(s);
    index_.emplace(list_.back(), id);
    return id;
  }
  const std::deque<std::string>& list() const { return list_; }

 private:
  std::deque<std::string> list_;  // deque: the index views its strings
  std::unordered_map<std::string_view, int64_t> index_;
};

class Writer {
 public:
  explicit Writer(OutputFile& out) : out_(out), top_(buf_) {}
  protozero::pbf_writer& top() { return top_; }
  // Call between top-level fields only (no sub-message open).
  void maybe_flush() {
    if (buf_.size() >= (1 << 18)) flush();
  }
  void flush() {
    out_.write(buf_);
    buf_.clear();
  }

 private:
  OutputFile& out_;
  std::string buf_;
  protozero::pbf_writer top_;
};

void value_type(protozero::pbf_writer& top, protozero::pbf_tag_type tag, int64_t type, int64_t unit) {
  protozero::pbf_writer v(top, tag);
  v.add_int64(pb::kType, type);
  v.add_int64(pb::kUnit, unit);
}

// The profile's header: sample types, period, time, comment. True when it carries heap values (record
// --heap).
bool write_header(protozero::pbf_writer& top, Strings& strings, const model::Profile& profile,
                  const PprofPart& part) {
  using V = PprofPart::Values;
  if (part.values != V::OffCpu) {
    value_type(top, pb::kSampleType, strings.intern("samples"), strings.intern("count"));
    value_type(top, pb::kSampleType, strings.intern("cpu"), strings.intern("nanoseconds"));
  }
  // Wall-clock samples of a blocked or preempted thread (leaf: an Idle label such as "[blocked: futex]"),
  // each worth one interval: Pyroscope and Parca show it as a profile type of its own.
  if (part.values != V::Cpu)
    value_type(top, pb::kSampleType, strings.intern("off_cpu"), strings.intern("nanoseconds"));
  // A heap profile (record --heap) also carries Go's heap profile values, as `go tool pprof` and Pyroscope
  // name them: blocks and bytes allocated, and those still allocated at the end (in use).
  bool heap = false;
  for (const model::Process& proc : profile.processes)
    for (const model::Thread& t : proc.threads) heap |= !t.allocations.empty();
  heap = heap && part.values == V::All;
  if (heap) {
    value_type(top, pb::kSampleType, strings.intern("alloc_objects"), strings.intern("count"));
    value_type(top, pb::kSampleType, strings.intern("alloc_space"), strings.intern("bytes"));
    value_type(top, pb::kSampleType, strings.intern("inuse_objects"), strings.intern("count"));
    value_type(top, pb::kSampleType, strings.intern("inuse_space"), strings.intern("bytes"));
  }
  value_type(top, pb::kPeriodType, strings.intern("cpu"), strings.intern("nanoseconds"));
  top.add_int64(pb::kPeriod, static_cast<int64_t>(profile.meta.interval_ms * 1e6));
  top.add_int64(pb::kDefaultSampleType, strings.intern(part.values == V::OffCpu ? "off_cpu" : "samples"));
  top.add_int64(pb::kTimeNanos, static_cast<int64_t>(profile.meta.start_unix_ms * 1e6));
  if (profile.meta.end_monotonic_ns && *profile.meta.end_monotonic_ns > profile.meta.start_monotonic_ns)
    top.add_int64(pb::kDurationNanos,
                  static_cast<int64_t>(*profile.meta.end_monotonic_ns - profile.meta.start_monotonic_ns));
  top.add_int64(pb::kComment, strings.intern("recorded by " + profile.meta.product));
  return heap;
}

// Mappings and locations, written as they are first used; the functions the locations' lines use.
class Locations {
 public:
  Locations(const model::Profile& profile, FunctionTable& functions, protozero::pbf_writer& top, size_t only)
      : profile_(profile), functions_(functions), top_(top), binary_libs_(profile.processes.size()) {
    // The mapping of a binary in a process (frames symbolicated on the model hold binary-relative addresses):
    // a binary is its library by debug name and breakpad ID, or without an ID by path and name. Indexed, not
    // compared pairwise: the agent writes one pprof per process of a window, each of ~100 processes'
    // libraries against ~300 binaries.
    std::unordered_map<std::string, std::vector<model::BinaryId>> by_key;
    auto key = [](const std::string& a, const std::string& b, bool id) {
      return (id ? "i" : "p") + a + '\0' + b;
    };
    for (model::BinaryId b = 0; b < profile.binaries.size(); ++b) {
      const model::Binary& bin = profile.binaries[b];
      const bool id = !bin.breakpad_id.empty();
      by_key[id ? key(bin.debug_name, bin.breakpad_id, true) : key(bin.path, bin.name, false)].push_back(b);
    }
    for (size_t pi = 0; pi < profile.processes.size(); ++pi) {
      if (only != PprofPart::kAllProcesses && pi != only) continue;
      for (const model::Lib* l : model::disjoint_libs(profile.processes[pi]))
        for (bool id : {true, false})
          if (auto it =
                  by_key.find(id ? key(l->debug_name, l->breakpad_id, true) : key(l->path, l->name, false));
              it != by_key.end())
            for (model::BinaryId b : it->second) binary_libs_[pi].try_emplace(b, l);
    }
  }

  // One location per (process, innermost frame of an inline run), written when first used. An inline run is
  // the frames of one address, depth 0 (the function the code is in) to n; its Lines are innermost first, as
  // pprof wants them.
  uint64_t of(size_t process, std::span<const model::FrameId> run) {
    auto [it, inserted] =
        location_id_.try_emplace((static_cast<uint64_t>(process) << 32) | run[0], location_id_.size() + 1);
    if (!inserted) return it->second;
    const model::Frame& fr = profile_.frames.get(run[0]);
    protozero::pbf_writer loc(top_, pb::kLocation);
    loc.add_uint64(pb::kLocId, it->second);
    if (fr.kind == model::FrameKind::Native) {
      const model::Lib* l = nullptr;
      uint64_t address = fr.address;
      if (fr.binary != model::kNoBinary) {
        auto b = binary_libs_[process].find(fr.binary);
        if (b != binary_libs_[process].end()) {
          l = b->second;
          address = fr.address + (l->start - l->offset);
        }
      } else {
        l = functions_.lib_at(process, fr.address);
      }
      if (uint64_t m = mapping_for(l)) {
        loc.add_uint64(pb::kMappingId, m);
        if (fr.name != model::kNoString) mappings_[m - 1].named = true;
      }
      loc.add_uint64(pb::kAddress, address);
    } else if (fr.kind == model::FrameKind::Kernel) {
      loc.add_uint64(pb::kAddress, fr.address);
    }
    for (model::FrameId f : run) {  // innermost first
      for (const FrameLine& line_info : functions_.lines(process, f)) {
        protozero::pbf_writer line(loc, pb::kLine);
        line.add_uint64(pb::kFunctionId, line_info.function + 1);
        if (line_info.line) line.add_int64(pb::kLineNumber, line_info.line);
        if (function_used_.size() <= line_info.function) function_used_.resize(line_info.function + 1);
        function_used_[line_info.function] = true;
      }
    }
    return it->second;
  }

  // The mappings and functions used, after the samples.
  void write_tables(Strings& strings, Writer& w) {
    for (size_t i = 0; i < mappings_.size(); ++i) {
      const model::Lib& l = *mappings_[i].lib;
      protozero::pbf_writer m(top_, pb::kMapping);
      m.add_uint64(pb::kMapId, i + 1);
      m.add_uint64(pb::kMemoryStart, l.start);
      m.add_uint64(pb::kMemoryLimit, l.end);
      m.add_uint64(pb::kFileOffset, l.offset);
      m.add_int64(pb::kFilename, strings.intern(l.path.empty() ? l.name : l.path));
      if (!l.code_id.empty()) m.add_int64(pb::kBuildId, strings.intern(l.code_id));
      m.add_bool(pb::kHasFunctions, mappings_[i].named);
      m.add_bool(pb::kHasFilenames, mappings_[i].named);
      m.add_bool(pb::kHasLineNumbers, mappings_[i].named);
      m.add_bool(pb::kHasInlineFrames, mappings_[i].named);
    }
    w.maybe_flush();
    for (size_t i = 0; i < function_used_.size(); ++i) {
      if (!function_used_[i]) continue;
      const Function& f = functions_.function(static_cast<FunctionId>(i));
      protozero::pbf_writer fn(top_, pb::kFunction);
      fn.add_uint64(pb::kFnId, i + 1);
      fn.add_int64(pb::kName, strings.intern(f.name));
      fn.add_int64(pb::kSystemName, strings.intern(f.system_name));
      if (!f.file.empty()) fn.add_int64(pb::kFnFilename, strings.intern(f.file));
      if (f.start_line) fn.add_int64(pb::kStartLine, f.start_line);
    }
    w.maybe_flush();
  }

 private:
  // Mappings: one per library of a process that a location uses; id = position + 1.
  struct MappingInfo {
    const model::Lib* lib;
    bool named = false;  // some location in it has a symbolicated function
  };
  uint64_t mapping_for(const model::Lib* l) {
    if (!l) return 0;
    auto [it, inserted] = mapping_id_.try_emplace(l, mappings_.size() + 1);
    if (inserted) mappings_.push_back({l});
    return it->second;
  }

  const model::Profile& profile_;
  FunctionTable& functions_;
  protozero::pbf_writer& top_;
  std::vector<MappingInfo> mappings_;
  std::unordered_map<const model::Lib*, uint64_t> mapping_id_;
  std::vector<std::unordered_map<model::BinaryId, const model::Lib*>> binary_libs_;
  std::unordered_map<uint64_t, uint64_t> location_id_;  // process << 32 | innermost frame
  std::vector<bool> function_used_;
};

struct Weight {
  int64_t count = 0, cpu_ns = 0, off_cpu_ns = 0;
  int64_t alloc_n = 0, alloc_b = 0, inuse_n = 0, inuse_b = 0;
};

// A thread's samples and allocations summed by stack and the program marker they fall in (model/markers.h:
// the innermost; the key's high half, kNoString for none); `order` gets the keys as first seen.
class ThreadWeights {
 public:
  ThreadWeights(const model::Profile& profile, Clock clock)
      : profile_(profile),
        interval_ns_(static_cast<int64_t>(profile.meta.interval_ms * 1e6)),
        clock_(clock) {}

  void sum(const model::Thread& th) {
    per_stack_.clear();
    order.clear();
    const std::vector<model::StringId> marker = model::innermost_marker_of_samples(th);
    for (size_t i = 0; i < th.samples.size(); ++i) {
      const model::Sample& s = th.samples[i];
      if (s.stack == model::kNoStack) continue;
      auto [it, inserted] = per_stack_.try_emplace(key(s.stack, marker[i]));
      if (inserted) order.push_back(it->first);
      const bool off = profile_.off_cpu(s.stack);
      // samples/count, pprof's default view, counts on-CPU samples unless --wall; off_cpu keeps the waits.
      if (!off || clock_ == Clock::Wall) ++it->second.count;
      if (s.cpu_delta_ns > 0) it->second.cpu_ns += s.cpu_delta_ns;
      if (off) it->second.off_cpu_ns += interval_ns_;
    }
    freed_.clear();
    for (const model::Allocation& a : th.allocations)
      if (a.bytes < 0) freed_.insert(a.address);
    for (const model::Allocation& a : th.allocations) {
      if (a.bytes < 0 || a.stack == model::kNoStack) continue;
      auto [it, inserted] = per_stack_.try_emplace(key(a.stack, model::kNoString));
      if (inserted) order.push_back(it->first);
      it->second.alloc_n += a.count;
      it->second.alloc_b += a.bytes;
      if (!freed_.contains(a.address)) {
        it->second.inuse_n += a.count;
        it->second.inuse_b += a.bytes;
      }
    }
  }
  const Weight& of(uint64_t key) { return per_stack_[key]; }
  static uint64_t key(model::StackId st, model::StringId marker) { return uint64_t{marker} << 32 | st; }

  std::vector<uint64_t> order;

 private:
  const model::Profile& profile_;
  const int64_t interval_ns_;
  const Clock clock_;
  std::unordered_set<uint64_t> freed_;  // a thread's allocation rows that have their free row
  std::unordered_map<uint64_t, Weight> per_stack_;
};

// Samples: aggregated per thread by stack, each after the locations it uses.
void write_samples(const model::Profile& profile, Strings& strings, Locations& locations, Writer& w,
                   bool heap, Clock clock, const PprofPart& part) {
  auto& top = w.top();
  const int64_t k_thread = strings.intern("thread"), k_tid = strings.intern("tid"),
                k_process = strings.intern("process"), k_pid = strings.intern("pid"),
                k_marker = strings.intern("marker"), k_category = strings.intern("category");
  ThreadWeights weights(profile, clock);
  std::vector<uint64_t> locs;
  std::vector<model::FrameId> run;
  for (size_t pi = 0; pi < profile.processes.size(); ++pi) {
    if (part.process != PprofPart::kAllProcesses && part.process != pi) continue;
    const model::Process& proc = profile.processes[pi];
    const int64_t proc_name = strings.intern(proc.name);
    for (const model::Thread& th : proc.threads) {
      weights.sum(th);
      const int64_t th_name = strings.intern(th.name);
      for (uint64_t key : weights.order) {
        const auto st = static_cast<model::StackId>(key), marker = static_cast<model::StringId>(key >> 32);
        const Weight& wt = weights.of(key);
        // A part with one kind of value leaves out the stacks without it.
        if ((part.values == PprofPart::Values::Cpu && wt.count == 0 && wt.cpu_ns == 0) ||
            (part.values == PprofPart::Values::OffCpu && wt.off_cpu_ns == 0))
          continue;
        // Locations first (they are top-level messages of their own), then the sample.
        locs.clear();
        for (model::StackId s = st; s != model::kNoStack;) {
          run.clear();
          // An inlined frame's caller is the next frame of its run, down to depth 0.
          do {
            run.push_back(profile.stacks.frame(s));
            s = profile.stacks.prefix(s);
          } while (s != model::kNoStack && profile.frames.get(run.back()).inline_depth > 0);
          locs.push_back(locations.of(pi, run));
        }
        {
          protozero::pbf_writer sample(top, pb::kSample);
          sample.add_packed_uint64(pb::kLocationId, locs.begin(), locs.end());
          const int64_t values[7] = {wt.count,   wt.cpu_ns,  wt.off_cpu_ns, wt.alloc_n,
                                     wt.alloc_b, wt.inuse_n, wt.inuse_b};
          const int64_t* first = std::begin(values) + (part.values == PprofPart::Values::OffCpu ? 2 : 0);
          const int64_t* last = part.values == PprofPart::Values::Cpu ? std::begin(values) + 2
                                : heap                                ? std::end(values)
                                                                      : std::begin(values) + 3;
          sample.add_packed_int64(pb::kValue, first, last);
          auto label = [&](int64_t key, int64_t str, int64_t num) {
            protozero::pbf_writer l(sample, pb::kLabel);
            l.add_int64(pb::kKey, key);
            if (str)
              l.add_int64(pb::kStr, str);
            else
              l.add_int64(pb::kNum, num);
          };
          label(k_thread, th_name, 0);
          label(k_tid, 0, th.tid);
          label(k_process, proc_name, 0);
          label(k_pid, 0, proc.pid);
          if (marker != model::kNoString) label(k_marker, strings.intern(profile.strings.get(marker)), 0);
          // The kernel's own time (passes/kernel_time.h), for a fleet engine to filter by.
          if (const auto c = profile.frames.get(profile.stacks.frame(st)).category;
              (c == model::Category::KernelThread || c == model::Category::Irq ||
               c == model::Category::Softirq) &&
              static_cast<size_t>(c) < profile.meta.categories.size())
            label(k_category, strings.intern(profile.meta.categories[static_cast<size_t>(c)].name), 0);
        }
        w.maybe_flush();
      }
    }
  }
}

}  // namespace

// Header, samples (each after the locations it uses), mappings, functions, then the strings all of them name.
void write_pprof(const model::Profile& profile, OutputFile& out, Clock clock, const PprofPart& part) {
  FunctionTable functions(profile, part.process);
  Strings strings;
  Writer w(out);
  const bool heap = write_header(w.top(), strings, profile, part);
  Locations locations(profile, functions, w.top(), part.process);
  write_samples(profile, strings, locations, w, heap, clock, part);
  locations.write_tables(strings, w);
  for (const std::string& s : strings.list()) {
    w.top().add_string(pb::kStringTable, s);
    w.maybe_flush();
  }
  w.flush();
}

Status write_pprof(const model::Profile& profile, const std::string& path, Clock clock) {
  auto out = open_output(path);
  if (!out) return std::move(out).take_error();
  write_pprof(profile, **out, clock);
  return (*out)->finish();
}

}  // namespace fxprof::sinks
