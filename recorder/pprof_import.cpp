// A decoded pprof profile into the model (pprof_import.h): which sample type is what, threads from labels,
// frames from locations, then the samples and allocations, spread over the profile's duration.
#include "recorder/pprof_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "base/fd.h"
#include "elf/elf.h"
#include "recorder/pprof_decode.h"

namespace fxprof::recorder {
namespace {

using pprof::Decoded;

constexpr uint64_t kKernelStart = 0xffff800000000000;  // x86-64 and arm64: addresses above are the kernel's

// Which value of a sample is what (-1: none).
struct Columns {
  int count = -1, cpu = -1, off = -1;
  int alloc_n = -1, alloc_b = -1, inuse_n = -1, inuse_b = -1;
  bool count_in_ns = false;  // the counted type is time: one sample per interval
  bool heap() const { return alloc_n >= 0 || alloc_b >= 0 || inuse_n >= 0 || inuse_b >= 0; }
};

Result<Columns> columns(const Decoded& d, const std::string& chosen, PprofStats& st) {
  Columns c;
  std::vector<std::pair<std::string_view, std::string_view>> t;
  for (const pprof::ValueType& v : d.sample_types) {
    t.emplace_back(d.str(v.type), d.str(v.unit));
    st.types.push_back(std::string(t.back().first) + "/" + std::string(t.back().second));
  }
  auto find = [&](std::string_view name) {
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i].first == name) return static_cast<int>(i);
    return -1;
  };
  if (!chosen.empty()) {
    c.count = find(chosen);
    if (c.count < 0) {
      std::string names;
      for (const std::string& n : st.types) names += (names.empty() ? "" : ", ") + n;
      return Err("no sample type " + chosen + " (its types: " + names + ")");
    }
  } else {
    c.count = find("samples");
    c.off = find("off_cpu");
    c.alloc_n = find("alloc_objects"), c.alloc_b = find("alloc_space");
    c.inuse_n = find("inuse_objects"), c.inuse_b = find("inuse_space");
  }
  c.cpu = find("cpu");
  if (c.cpu >= 0 && t[c.cpu].second != "nanoseconds") c.cpu = -1;
  if (c.count < 0 && c.cpu >= 0) c.count = c.cpu;
  if (c.count < 0 && c.off < 0 && !c.heap()) {
    for (size_t i = 0; i < t.size() && c.count < 0; ++i)
      if (t[i].second == "count") c.count = static_cast<int>(i);
    if (c.count < 0 && d.default_sample_type) c.count = find(d.str(d.default_sample_type));
    if (c.count < 0) c.count = static_cast<int>(t.size()) - 1;
  }
  if (c.count >= 0) {
    c.count_in_ns = t[c.count].second == "nanoseconds";
    st.counted = st.types[c.count];
  }
  return c;
}

// The sampling interval: the period when it is time, else the CPU time per sample, else 1 ms.
uint64_t interval_ns(const Decoded& d, const Columns& c) {
  constexpr uint64_t kMax = 10'000'000'000;  // 10 s: sample times stay far from overflowing
  if (d.str(d.period_type.unit) == "nanoseconds" && d.period > 0)
    return std::min(static_cast<uint64_t>(d.period), kMax);
  if (c.cpu >= 0 && c.count >= 0 && c.count != c.cpu) {
    double cpu = 0, n = 0;
    for (const pprof::Sample& s : d.samples) {
      cpu += static_cast<double>(std::max<int64_t>(0, d.values[s.first_value + c.cpu]));
      n += static_cast<double>(std::max<int64_t>(0, d.values[s.first_value + c.count]));
    }
    if (n > 0 && cpu / n >= 1) return std::min(static_cast<uint64_t>(cpu / n), kMax);
  }
  return 1'000'000;
}

// The thread a sample's labels name.
struct ThreadKey {
  uint32_t pid = 0, tid = 0;
  bool has_tid = false;
  std::string_view thread, process;
  auto tie() const { return std::tie(pid, tid, has_tid, thread); }
  bool operator<(const ThreadKey& o) const { return tie() < o.tie(); }
};

uint32_t label_number(const Decoded& d, const pprof::Label& l) {
  if (l.str) return static_cast<uint32_t>(std::strtoul(std::string(d.str(l.str)).c_str(), nullptr, 10));
  return static_cast<uint32_t>(l.num);
}

ThreadKey thread_of(const Decoded& d, const pprof::Sample& s) {
  ThreadKey k;
  for (uint32_t i = 0; i < s.labels; ++i) {
    const pprof::Label& l = d.labels[s.first_label + i];
    const std::string_view key = d.str(l.key);
    if (key == "pid" || key == "process_id") {
      k.pid = label_number(d, l);
    } else if (key == "tid" || key == "thread_id") {
      k.tid = label_number(d, l);
      k.has_tid = true;
    } else if ((key == "thread" || key == "thread_name") && l.str) {
      k.thread = d.str(l.str);
    } else if ((key == "process" || key == "process_name" || key == "comm") && l.str) {
      k.process = d.str(l.str);
    }
  }
  return k;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Builds the model from the decoded tables.
class Builder {
 public:
  Builder(const Decoded& d, const Columns& c, model::Profile& p) : d_(d), c_(c), p_(p) {
    loc_frames_.resize(d.locations.size());
    loc_done_.resize(d.locations.size());
    libs_.resize(d.mappings.size());
    interval_ = interval_ns(d, c);
    base_ = d.time_nanos > 0 ? static_cast<uint64_t>(d.time_nanos) : 1'000'000'000;  // below 2^63
  }

  // How many samples, off-CPU samples a pprof sample makes.
  std::pair<uint64_t, uint64_t> counts(const pprof::Sample& s) const {
    auto n = [&](int col, bool in_ns) -> uint64_t {
      if (col < 0) return 0;
      const int64_t v = d_.values[s.first_value + col];
      if (v <= 0) return 0;
      return in_ns ? static_cast<uint64_t>(
                         std::llround(static_cast<double>(v) / static_cast<double>(interval_)))
                   : static_cast<uint64_t>(v);
    };
    return {n(c_.count, c_.count_in_ns), n(c_.off, true)};
  }

  model::StackId stack_of(const pprof::Sample& s, uint32_t process) {
    model::StackId st = model::kNoStack;
    for (uint32_t i = s.locations; i-- > 0;) {
      const uint32_t li = d_.location_index.at(d_.location_ids[s.first_location + i]);
      for (model::FrameId f : frames_of(li, process)) st = p_.stacks.intern(st, f);
    }
    return st;
  }

  // An off-CPU sample's stack: its leaf label in the Idle category, or "[blocked]" below its leaf.
  model::StackId off_cpu_stack(model::StackId st) {
    if (st != model::kNoStack) {
      const model::Frame& leaf = p_.frames.get(p_.stacks.frame(st));
      if (leaf.kind == model::FrameKind::Label && leaf.name != model::kNoString) {
        const std::string name(p_.strings.get(leaf.name));
        return p_.stacks.intern(p_.stacks.prefix(st), p_.label_frame(name, model::Category::Idle));
      }
    }
    return p_.stacks.intern(st, p_.label_frame("[blocked]", model::Category::Idle));
  }

  // The libraries each process's locations used, into its libs.
  void add_libs() {
    for (auto& [process, mappings] : used_)
      for (uint32_t mi : mappings) p_.processes[process].libs.push_back(libs_[mi]);
  }

  uint64_t interval() const { return interval_; }
  uint64_t base() const { return base_; }

 private:
  const model::Lib& lib(uint32_t mi) {
    model::Lib& l = libs_[mi];
    if (!l.path.empty() || !l.name.empty()) return l;
    const pprof::Mapping& m = d_.mappings[mi];
    l.start = m.start;
    l.end = std::max(m.limit, m.start);
    l.offset = m.offset;
    l.path = std::string(d_.str(m.filename));
    l.name = l.path.empty() ? "[mapping " + std::to_string(m.id) + "]" : base_name(l.path);
    l.debug_name = l.name;
    l.debug_path = l.path;
    const std::string_view id = d_.str(m.build_id);
    std::vector<uint8_t> bytes;  // the build ID, when it is hex (Go, perf and ours write it so)
    for (size_t i = 0; id.size() % 2 == 0 && i < id.size(); i += 2) {
      const int hi = hex_digit(id[i]), lo = hex_digit(id[i + 1]);
      if (hi < 0 || lo < 0) {
        bytes.clear();
        break;
      }
      bytes.push_back(static_cast<uint8_t>(hi << 4 | lo));
    }
    if (!bytes.empty()) {
      l.code_id = elf::hex(bytes);
      l.breakpad_id = elf::breakpad_id(bytes);
    }
    return l;
  }

  // A location's frames, outermost first (its lines are innermost first); made once.
  const std::vector<model::FrameId>& frames_of(uint32_t li, uint32_t process) {
    const pprof::Location& loc = d_.locations[li];
    if (loc.mapping) {
      const uint32_t mi = d_.mapping_index.at(loc.mapping);
      if (used_[process].insert(mi).second) lib(mi);
    }
    std::vector<model::FrameId>& out = loc_frames_[li];
    if (loc_done_[li]) return out;
    loc_done_[li] = true;
    model::BinaryId bin = model::kNoBinary;
    uint64_t address = loc.address;
    if (loc.mapping) {
      const model::Lib& l = lib(d_.mapping_index.at(loc.mapping));
      bin = p_.intern_binary(l);
      const uint64_t bias = l.start - l.offset;
      if (address >= bias) address -= bias;
    }
    for (uint32_t i = loc.lines; i-- > 0;) {
      const pprof::Line& line = d_.lines[loc.first_line + i];
      const pprof::Function& fn = d_.functions[d_.function_index.at(line.function)];
      std::string_view name = d_.str(fn.name);
      if (name.empty()) name = d_.str(fn.system_name);
      if (name.empty()) continue;
      model::Frame f;
      f.name = p_.strings.intern(name);
      f.inline_depth = static_cast<uint8_t>(std::min<uint32_t>(loc.lines - 1 - i, 255));
      if (fn.filename) f.file = p_.strings.intern(d_.str(fn.filename));
      f.line = line.line > 0 && line.line < UINT32_MAX ? static_cast<uint32_t>(line.line) : 0;
      if (bin != model::kNoBinary) {
        f.address = address;
        f.binary = bin;
      } else if (loc.address >= kKernelStart) {
        f.address = loc.address;
        f.kind = model::FrameKind::Kernel;
        f.category = model::Category::Kernel;
      } else {
        f.kind = model::FrameKind::Label;
      }
      out.push_back(p_.frames.intern(f));
    }
    if (!out.empty()) return out;
    if (bin != model::kNoBinary)
      out.push_back(p_.frames.intern(
          {address, model::kNoString, model::FrameKind::Native, model::Category::User, 0, bin}));
    else if (loc.address >= kKernelStart)
      out.push_back(p_.kernel_frame(loc.address));
    else
      out.push_back(p_.native_frame(loc.address));
    return out;
  }

  const Decoded& d_;
  const Columns& c_;
  model::Profile& p_;
  std::vector<std::vector<model::FrameId>> loc_frames_;
  std::vector<bool> loc_done_;
  std::vector<model::Lib> libs_;                 // per mapping, made when first used
  std::map<uint32_t, std::set<uint32_t>> used_;  // process -> mappings its locations used
  uint64_t interval_ = 1'000'000, base_ = 0;
};

}  // namespace

Result<PprofImported> import_pprof(std::string bytes, const ImportOptions& o) {
  if (o.start_ns || o.end_ns) return Err("--time-range: a pprof profile's samples have no times");
  auto decoded = pprof::decode(std::move(bytes));
  if (!decoded) return std::move(decoded).take_error();
  const Decoded& d = *decoded;
  PprofImported out;
  PprofStats& st = out.stats;
  auto cols = columns(d, o.event, st);
  if (!cols) return std::move(cols).take_error();
  model::Profile& p = out.profile;
  Builder b(d, *cols, p);

  // Pass 1: the threads (in the order first seen) and how many samples each gets.
  std::map<ThreadKey, uint32_t> thread_index;
  std::vector<ThreadKey> keys;
  std::vector<uint64_t> per_thread;
  std::vector<int32_t> sample_thread(d.samples.size(), -1);
  uint64_t total = 0;
  for (size_t i = 0; i < d.samples.size(); ++i) {
    const ThreadKey k = thread_of(d, d.samples[i]);
    if ((!o.pids.empty() && std::find(o.pids.begin(), o.pids.end(), k.pid) == o.pids.end()) ||
        (!o.tids.empty() && std::find(o.tids.begin(), o.tids.end(), k.tid) == o.tids.end()))
      continue;
    auto [it, inserted] = thread_index.try_emplace(k, static_cast<uint32_t>(keys.size()));
    if (inserted) {
      keys.push_back(k);
      per_thread.push_back(0);
    }
    sample_thread[i] = static_cast<int32_t>(it->second);
    const auto [n, off] = b.counts(d.samples[i]);
    if (n > kMaxPprofSamples || off > kMaxPprofSamples || (total += n + off) > kMaxPprofSamples)
      return Err("it holds more than " + std::to_string(kMaxPprofSamples) + " samples of " +
                 std::to_string(b.interval()) + " ns: too many to import");
    per_thread[it->second] += n + off;
  }
  // At most 30 years (a hostile duration must not overflow the times).
  uint64_t span = std::min<uint64_t>(d.duration_nanos > 0 ? static_cast<uint64_t>(d.duration_nanos) : 0,
                                     uint64_t{1'000'000'000'000'000'000});
  for (uint64_t n : per_thread) span = std::max(span, d.duration_nanos > 0 ? 0 : n * b.interval());

  // The processes and threads.
  std::string main_name = "pprof";
  for (const pprof::Mapping& m : d.mappings)
    if (m.filename) {
      main_name = base_name(d.str(m.filename));
      break;
    }
  std::unordered_map<uint32_t, uint32_t> process_of_pid;
  std::vector<std::pair<uint32_t, uint32_t>> place(keys.size());  // thread -> (process, thread) indices
  for (size_t t = 0; t < keys.size(); ++t) {
    const ThreadKey& k = keys[t];
    auto [pit, new_process] = process_of_pid.try_emplace(k.pid, static_cast<uint32_t>(p.processes.size()));
    if (new_process) {
      model::Process& proc = p.processes.emplace_back();
      proc.pid = k.pid;
      proc.name = k.process.empty() ? main_name : std::string(k.process);
      proc.start_ns = b.base();
      proc.end_ns = b.base() + span;
    }
    model::Process& proc = p.processes[pit->second];
    model::Thread& th = proc.threads.emplace_back();
    th.tid = k.has_tid ? k.tid : (proc.threads.size() == 1 ? k.pid : 0x40000000u + static_cast<uint32_t>(t));
    th.name = k.thread.empty() ? proc.name : std::string(k.thread);
    th.is_main = proc.threads.size() == 1;
    th.start_ns = b.base();
    th.end_ns = b.base() + span;
    th.samples.reserve(per_thread[t]);
    place[t] = {pit->second, static_cast<uint32_t>(proc.threads.size() - 1)};
  }

  // Pass 2: samples, spread evenly (a thread's samples fill the duration at most), and allocations.
  std::vector<uint64_t> emitted(keys.size());
  uint64_t tag = 0;
  for (size_t i = 0; i < d.samples.size(); ++i) {
    if (sample_thread[i] < 0) continue;
    const auto t = static_cast<uint32_t>(sample_thread[i]);
    const pprof::Sample& s = d.samples[i];
    model::Thread& th = p.processes[place[t].first].threads[place[t].second];
    const model::StackId stack = b.stack_of(s, place[t].first);
    const double step = per_thread[t] && per_thread[t] * b.interval() > span
                            ? static_cast<double>(span) / static_cast<double>(per_thread[t])
                            : static_cast<double>(b.interval());
    auto time = [&] { return b.base() + static_cast<uint64_t>(static_cast<double>(emitted[t]++) * step); };
    const auto [n, off] = b.counts(s);
    const int64_t cpu = cols->cpu >= 0 && n ? std::max<int64_t>(0, d.values[s.first_value + cols->cpu]) : -1;
    for (uint64_t k = 0; k < n; ++k)
      th.samples.push_back({time(), stack, model::saturate_cpu_delta(cpu < 0 ? -1 : cpu / int64_t(n))});
    if (off) {
      const model::StackId off_stack = b.off_cpu_stack(stack);
      for (uint64_t k = 0; k < off; ++k) th.samples.push_back({time(), off_stack, -1});
    }
    st.samples += n;
    st.off_cpu_samples += off;
    if (!cols->heap()) continue;
    auto value = [&](int col) {
      return col < 0 ? int64_t{0} : std::max<int64_t>(0, d.values[s.first_value + col]);
    };
    const int64_t alloc_n = value(cols->alloc_n), alloc_b = value(cols->alloc_b);
    const int64_t inuse_n = value(cols->inuse_n), inuse_b = value(cols->inuse_b);
    const uint64_t at = b.base() + static_cast<uint64_t>(static_cast<double>(emitted[t]) * step);
    auto row = [&](int64_t count, int64_t bytes, bool freed) {
      if (count <= 0 && bytes <= 0) return;
      const uint32_t blocks = static_cast<uint32_t>(std::clamp<int64_t>(count, 1, UINT32_MAX));
      th.allocations.push_back({at, stack, bytes, ++tag, th.tid, blocks});
      if (freed) th.allocations.push_back({at, stack, -bytes, tag, th.tid, blocks});
      st.allocations += 1;
    };
    row(inuse_n, inuse_b, false);
    row(std::max<int64_t>(0, alloc_n - inuse_n), std::max<int64_t>(0, alloc_b - inuse_b), true);
  }
  b.add_libs();
  if (st.samples + st.off_cpu_samples + st.allocations == 0)
    return Err(o.pids.empty() && o.tids.empty() ? "it has no samples"
                                                : "the --pid and --tid filters left no samples");

  p.meta.interval_ms = static_cast<double>(b.interval()) / 1e6;
  p.meta.start_unix_ms = d.time_nanos > 0 ? static_cast<double>(d.time_nanos) / 1e6 : 0;
  p.meta.start_monotonic_ns = b.base();
  p.meta.end_monotonic_ns = b.base() + span;
  std::string comment;
  for (int64_t c : d.comments)
    if (c >= 0 && static_cast<size_t>(c) < d.strings.size())
      comment += (comment.empty() ? "" : "; ") + std::string(d.str(c));
  p.meta.product = "fxprof import: pprof" + (comment.empty() ? std::string() : " (" + comment + ")");
  st.processes = static_cast<uint32_t>(p.processes.size());
  st.threads = static_cast<uint32_t>(keys.size());
  return out;
}

bool is_pprof_file(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  char head[4096];
  const ssize_t n = fd.valid() ? pread(fd.get(), head, sizeof head, 0) : -1;
  return n > 0 && looks_like_pprof(std::string_view(head, static_cast<size_t>(n)));
}

Result<PprofImported> import_pprof_file(const std::string& path, const ImportOptions& o) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  struct stat sb {};
  if (!fd.valid() || fstat(fd.get(), &sb) != 0) return Err("cannot open " + path + ": " + errno_text(errno));
  if (!S_ISREG(sb.st_mode)) return Err(path + ": not a regular file");
  if (static_cast<uint64_t>(sb.st_size) > pprof::kMaxPprofBytes)
    return Err(path + ": larger than " + std::to_string(pprof::kMaxPprofBytes >> 20) + " MB");
  std::string bytes(static_cast<size_t>(sb.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = pread(fd.get(), bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  auto r = import_pprof(std::move(bytes), o);
  if (!r) return Err(path + ": " + r.error());
  return r;
}

}  // namespace fxprof::recorder
