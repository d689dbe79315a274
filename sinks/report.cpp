#include "sinks/report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/terminal.h"
#include "sinks/call_tree.h"

namespace fxprof::sinks {
namespace {

double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

uint64_t count_lost(const model::Profile& profile) {
  uint64_t lost = 0;
  for (const auto& proc : profile.processes)
    for (const auto& th : proc.threads)
      for (const auto& m : th.markers) {
        if (m.name == model::kNoString || profile.strings.get(m.name) != "Lost records") continue;
        for (const auto& f : m.fields)
          if (!f.is_string) lost += static_cast<uint64_t>(f.number);
      }
  return lost;
}

ReportTreeNode tree_node(const CallTree& t, const FunctionTable& fns, uint32_t n, uint64_t min_samples) {
  ReportTreeNode out;
  out.name = fns.function(t.node(n).function).name;
  out.self = t.node(n).self;
  out.total = t.node(n).total;
  std::vector<uint32_t> kids(t.children(n).begin(), t.children(n).end());
  std::stable_sort(kids.begin(), kids.end(),
                   [&](uint32_t a, uint32_t b) { return t.node(a).total > t.node(b).total; });
  for (uint32_t c : kids)
    if (t.node(c).total >= min_samples && t.node(c).total > 0)
      out.children.push_back(tree_node(t, fns, c, min_samples));
  return out;
}

void format_tree(const ReportTreeNode& n, uint64_t section, int depth, std::string& out) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %6.2f%% %6.2f%%  ", percent(n.total, section), percent(n.self, section));
  out += buf;
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += terminal_safe(n.name);
  out += '\n';
  for (const auto& c : n.children) format_tree(c, section, depth + 1, out);
}

void json_tree(const ReportTreeNode& n, JsonWriter& w) {
  w.begin_object().key("name").value(n.name).key("self").value(n.self).key("total").value(n.total);
  w.key("children").begin_array();
  for (const auto& c : n.children) json_tree(c, w);
  w.end_array().end_object();
}

// Unwind failures: samples whose leaf-most label is "(stack truncated)". Counted per stack, then weighted.
// Only the samples the report's shares are of (its clock): the percentage is of those.
uint64_t count_truncated(const model::Profile& profile, const OffCpuFrames& off, Clock clock) {
  uint64_t n = 0;
  std::vector<int8_t> truncated(profile.stacks.size(), -1);
  auto is_truncated = [&](model::StackId s) {
    if (truncated[s] < 0) {
      bool found = false;
      for (model::StackId x = s; x != model::kNoStack && !found; x = profile.stacks.prefix(x)) {
        const model::Frame& f = profile.frames.get(profile.stacks.frame(x));
        found = f.kind == model::FrameKind::Label && f.name != model::kNoString &&
                profile.strings.get(f.name) == "(stack truncated)";
      }
      truncated[s] = found;
    }
    return truncated[s] == 1;
  };
  for (const auto& p : profile.processes)
    for (const auto& th : p.threads)
      for (const auto& s : th.samples)
        if (s.stack != model::kNoStack && off.counts(s.stack, clock) && is_truncated(s.stack)) ++n;
  return n;
}

// Section roots: the process root nodes, or the thread nodes under them (in build order: process, thread).
std::vector<uint32_t> section_roots(const CallTree& t, bool per_thread) {
  std::vector<uint32_t> roots;
  for (uint32_t p : t.children(0)) {
    if (!per_thread) {
      roots.push_back(p);
      continue;
    }
    for (uint32_t th : t.children(p)) roots.push_back(th);
  }
  return roots;
}

// Names back from labels: "name (pid N)" / "name (tid N)".
void split_label(const std::string& label, std::string& name, uint32_t& id) {
  size_t open = label.rfind(" (");
  name = label.substr(0, open);
  if (open != std::string::npos)
    id = static_cast<uint32_t>(std::strtoul(label.c_str() + open + 6, nullptr, 10));
}

// One process's (or thread's) section: its top functions by self and by total, and its tree if asked.
ReportSection make_section(const CallTree& t, const FunctionTable& fns, uint32_t root,
                           const ReportOptions& options) {
  const auto& node = t.node(root);
  ReportSection sec;
  if (options.per_thread) {
    split_label(fns.function(t.node(node.parent).function).name, sec.process_name, sec.pid);
    split_label(fns.function(node.function).name, sec.thread_name, sec.tid);
  } else {
    split_label(fns.function(node.function).name, sec.process_name, sec.pid);
  }
  sec.samples = node.total;
  sec.cpu_ns = node.total_cpu_ns;
  auto stats = t.function_stats(root);
  auto to_report = [&](const CallTree::FunctionStat& st) {
    return ReportFunction{fns.function(st.function).name, st.self, st.total, percent(st.self, sec.samples),
                          percent(st.total, sec.samples)};
  };
  for (size_t i = 0; i < stats.size() && sec.by_self.size() < options.limit; ++i)
    if (stats[i].self > 0) sec.by_self.push_back(to_report(stats[i]));
  std::stable_sort(stats.begin(), stats.end(),
                   [](const auto& a, const auto& b) { return a.total > b.total; });
  for (size_t i = 0; i < stats.size() && sec.by_total.size() < options.limit; ++i)
    sec.by_total.push_back(to_report(stats[i]));
  if (options.tree) {
    const auto min_samples =
        static_cast<uint64_t>(static_cast<double>(sec.samples) * options.tree_min_percent / 100.0);
    ReportTreeNode top = tree_node(t, fns, root, min_samples);
    sec.tree = std::move(top.children);
  }
  return sec;
}

}  // namespace

Report make_report(const model::Profile& profile, const ReportOptions& options) {
  Report r;
  FunctionTable fns(profile);
  TreeOptions to;
  to.inlined = options.inlined;
  to.process_roots = true;
  to.thread_roots = options.per_thread;
  to.clock = options.clock;
  CallTree t = CallTree::build(profile, fns, to);
  r.samples = t.total_samples();
  r.clock = options.clock;
  const OffCpuFrames off(profile);
  r.wall = wall_time(profile, off);
  r.samples_without_stack = t.samples_without_stack();
  r.lost_records = count_lost(profile);
  r.data_quality = profile.meta.data_quality;
  r.machine = profile.meta.machine;
  r.oscpu = profile.meta.oscpu;
  r.processes = static_cast<uint32_t>(profile.processes.size());
  for (const auto& p : profile.processes) r.threads += static_cast<uint32_t>(p.threads.size());
  r.truncated_stacks = count_truncated(profile, off, options.clock);
  for (uint32_t root : section_roots(t, options.per_thread))
    if (t.node(root).total != 0) {
      ReportSection sec = make_section(t, fns, root, options);
      sec.wall = wall_time(profile, off, [&](size_t pi, size_t ti) {
        const model::Process& p = profile.processes[pi];
        return p.pid == sec.pid && (sec.thread_name.empty() || p.threads[ti].tid == sec.tid);
      });
      r.sections.push_back(std::move(sec));
    }
  std::stable_sort(r.sections.begin(), r.sections.end(),
                   [](const auto& a, const auto& b) { return a.samples > b.samples; });
  return r;
}

std::string format_report(const Report& r, const ReportOptions& options) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%llu samples in %u threads of %u processes; %llu lost records; %llu unwind failures (stack "
                "truncated, %.1f%%)\n",
                static_cast<unsigned long long>(r.samples), r.threads, r.processes,
                static_cast<unsigned long long>(r.lost_records),
                static_cast<unsigned long long>(r.truncated_stacks), percent(r.truncated_stacks, r.samples));
  out += buf;
  // Which samples the shares below are of (README, "On-CPU and wall-clock time").
  if (r.clock == Clock::Cpu) {
    std::snprintf(
        buf, sizeof buf, "shares of on-CPU samples (%llu of %llu wall-clock samples; --wall counts all)",
        static_cast<unsigned long long>(r.samples), static_cast<unsigned long long>(r.wall.samples));
    out += buf;
  } else {
    out += "shares of wall-clock samples (on the CPU and off it)";
  }
  if (const std::string o = r.wall.format(); !o.empty()) out += "; off-CPU: " + o;
  out += '\n';
  // What ran where: the lines of the Firefox Profiler's Profile Info ("Platform").
  const model::Meta::Machine& m = r.machine;
  if (!m.command_line.empty()) out += "command: " + terminal_safe(m.command_line) + "\n";
  if (!m.cpu_name.empty() || m.logical_cpus || m.main_memory || !r.oscpu.empty()) {
    std::string line = m.cpu_name;
    auto add = [&](const std::string& part) { line += (line.empty() ? "" : ", ") + part; };
    if (m.physical_cpus) add(std::to_string(m.physical_cpus) + " cores");
    if (m.logical_cpus) add(std::to_string(m.logical_cpus) + " logical CPUs");
    if (m.main_memory) {
      std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(m.main_memory) / (1 << 30));
      add(buf);
    }
    if (!r.oscpu.empty()) add(r.oscpu);
    out += "machine: " + line + "\n";
  }
  // What the recording said about its own completeness (README, "Data quality"), for CI logs too.
  for (const model::Meta::Problem& q : r.data_quality)
    out += "data quality: " + terminal_safe(q.label) + " (" + std::to_string(q.count) + ")\n";
  if (r.samples_without_stack) {
    std::snprintf(buf, sizeof buf, "%llu samples without a stack (not counted below)\n",
                  static_cast<unsigned long long>(r.samples_without_stack));
    out += buf;
  }
  for (const auto& sec : r.sections) {
    out += '\n';
    // Names from the file: escaped, and appended rather than formatted (a long one would be cut at buf's
    // size).
    const std::string process = terminal_safe(sec.process_name);
    if (sec.thread_name.empty()) {
      out += "process " + process;
    } else {
      std::snprintf(buf, sizeof buf, " (tid %u) of ", sec.tid);
      out += "thread " + terminal_safe(sec.thread_name) + buf + process;
    }
    std::snprintf(buf, sizeof buf, " (pid %u): ", sec.pid);
    out += buf;
    std::snprintf(buf, sizeof buf, "%llu samples (%.1f%%), %.1f ms CPU\n",
                  static_cast<unsigned long long>(sec.samples), percent(sec.samples, r.samples),
                  static_cast<double>(sec.cpu_ns) / 1e6);
    out += buf;
    if (const std::string o = sec.wall.format(); !o.empty()) out += "  off-CPU: " + o + "\n";
    auto table = [&](const char* title, const std::vector<ReportFunction>& fs, bool by_total) {
      std::snprintf(buf, sizeof buf, "  %s\n     self%%   total%%   samples  function\n", title);
      out += buf;
      for (const auto& f : fs) {
        std::snprintf(buf, sizeof buf, "  %7.2f%% %7.2f%% %9llu  ", f.self_percent, f.total_percent,
                      static_cast<unsigned long long>(by_total ? f.total : f.self));
        out += buf;
        out += terminal_safe(f.name);
        out += '\n';
      }
    };
    table("top functions by self time", sec.by_self, false);
    table("top functions by total time", sec.by_total, true);
    if (options.tree) {
      std::snprintf(buf, sizeof buf,
                    "  call tree (branches under %.1f%% left out)\n   total%%   self%%  function\n",
                    options.tree_min_percent);
      out += buf;
      for (const auto& n : sec.tree) format_tree(n, sec.samples, 0, out);
    }
  }
  return out;
}

namespace {

void json_wall(const WallTime& wall, JsonWriter& w) {
  w.key("wallSamples").value(wall.samples).key("offCpu").begin_array();
  for (const auto& [reason, n] : wall.off_cpu)
    w.begin_object().key("reason").value(reason).key("samples").value(n).end_object();
  w.end_array();
}

}  // namespace

void write_report_json(const Report& r, JsonWriter& w) {
  w.begin_object();
  w.key("clock").value(r.clock == Clock::Cpu ? "cpu" : "wall");
  w.key("samples").value(r.samples);
  json_wall(r.wall, w);
  w.key("samplesWithoutStack").value(r.samples_without_stack);
  w.key("lostRecords").value(r.lost_records);
  w.key("truncatedStacks").value(r.truncated_stacks);
  w.key("threads").value(r.threads);
  w.key("processes").value(r.processes);
  const model::Meta::Machine& m = r.machine;
  w.key("machine").begin_object().key("cpuName").value(m.cpu_name).key("physicalCPUs").value(m.physical_cpus);
  w.key("logicalCPUs").value(m.logical_cpus).key("mainMemory").value(m.main_memory).key("os").value(r.oscpu);
  w.key("commandLine").value(m.command_line).end_object();
  w.key("dataQuality").begin_array();
  for (const model::Meta::Problem& q : r.data_quality)
    w.begin_object().key("label").value(q.label).key("count").value(q.count).end_object();
  w.end_array();
  w.key("sections").begin_array();
  for (const auto& sec : r.sections) {
    w.begin_object();
    w.key("process").value(sec.process_name).key("pid").value(sec.pid);
    if (!sec.thread_name.empty()) w.key("thread").value(sec.thread_name).key("tid").value(sec.tid);
    w.key("samples").value(sec.samples).key("cpuMs").value(static_cast<double>(sec.cpu_ns) / 1e6);
    json_wall(sec.wall, w);
    auto list = [&](const char* key, const std::vector<ReportFunction>& fs) {
      w.key(key).begin_array();
      for (const auto& f : fs)
        w.begin_object()
            .key("name")
            .value(f.name)
            .key("selfSamples")
            .value(f.self)
            .key("totalSamples")
            .value(f.total)
            .key("selfPercentage")
            .value(f.self_percent)
            .key("totalPercentage")
            .value(f.total_percent)
            .end_object();
      w.end_array();
    };
    list("topFunctionsBySelf", sec.by_self);
    list("topFunctionsByTotal", sec.by_total);
    if (!sec.tree.empty()) {
      w.key("callTree").begin_array();
      for (const auto& n : sec.tree) json_tree(n, w);
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

namespace {

// Standard-library code inlined into the program (Rust's core/alloc/std, C++'s std and __gnu_cxx): in the
// summary its self time counts for the function it was inlined into, as perf's symbol-level view would
// count it, so that `core::ptr::copy` or `std::vector<int>::operator[]` does not outrank the loop that
// called it.
bool library_inline(std::string_view name) {
  if (name.starts_with('<')) name.remove_prefix(1);  // <core::slice::Iter<T> as core::iter::Iterator>::next
  for (std::string_view prefix : {"core::", "alloc::", "std::", "__gnu_cxx::"})
    if (name.starts_with(prefix)) return true;
  return false;
}

}  // namespace

std::string top_self_summary(const model::Profile& profile, size_t n) {
  FunctionTable fns(profile);
  CallTree t = CallTree::build(profile, fns, {});
  const std::string off_cpu = wall_time(profile, OffCpuFrames(profile)).format();
  if (t.total_samples() == 0) return off_cpu.empty() ? std::string() : "no on-CPU samples; " + off_cpu;
  // Per node, in index order (a parent before its children): the function its self time counts for, and
  // whether it runs under fxprof's heap shim (fxprof's own work in the program: left out).
  const FunctionId shim = fns.label(model::kHeapShimLabel);
  std::vector<FunctionId> counts_for(t.nodes().size());
  std::vector<bool> in_shim(t.nodes().size());
  std::unordered_map<FunctionId, uint64_t> self;
  uint64_t own = 0;
  for (uint32_t i = 1; i < t.nodes().size(); ++i) {
    const CallTree::Node& node = t.node(i);
    in_shim[i] = node.function == shim || (node.parent != 0 && in_shim[node.parent]);
    const bool to_caller =
        node.inlined && node.parent != 0 && library_inline(fns.function(node.function).name);
    counts_for[i] = to_caller ? counts_for[node.parent] : node.function;
    if (in_shim[i])
      own += node.self;
    else if (node.self > 0)
      self[counts_for[i]] += node.self;
  }
  std::vector<std::pair<FunctionId, uint64_t>> ranked(self.begin(), self.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  const uint64_t total = t.total_samples() - std::min(own, t.total_samples());
  std::string out;
  char buf[80];
  for (size_t i = 0; i < ranked.size() && i < n && total > 0; ++i) {
    if (!out.empty()) out += ", ";
    out += terminal_safe(fns.function(ranked[i].first).name);
    std::snprintf(buf, sizeof buf, " %.1f%%", percent(ranked[i].second, total));
    out += buf;
  }
  if (own > 0) {
    std::snprintf(buf, sizeof buf, " (%.1f%% of samples in fxprof's heap shim left out)",
                  percent(own, t.total_samples()));
    out += buf;
  }
  if (!off_cpu.empty()) out += (out.empty() ? "" : " (on-CPU); ") + off_cpu;
  return out;
}

}  // namespace fxprof::sinks
