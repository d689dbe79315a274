// `fxprof report --markers` (marker_report.h).
#include "sinks/marker_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "base/terminal.h"
#include "model/markers.h"
#include "sinks/functions.h"

namespace fxprof::sinks {
namespace {

// The nearest-rank percentile of sorted durations.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

bool off_cpu(const model::Profile& p, model::StackId st) {
  const model::Frame& leaf = p.frames.get(p.stacks.frame(st));
  return leaf.kind == model::FrameKind::Label && leaf.category == model::Category::Idle;
}

// The function a sample is charged to: its leaf's innermost function on-CPU; off-CPU, the innermost function
// of the first user-code frame under the "[blocked: ...]" label (the leaf when there is none).
FunctionId charged_function(const model::Profile& p, FunctionTable& fns, size_t process, model::StackId st,
                            bool off) {
  model::StackId s = st;
  if (off)
    for (model::StackId x = st; x != model::kNoStack; x = p.stacks.prefix(x))
      if (p.frames.get(p.stacks.frame(x)).kind == model::FrameKind::Native) {
        s = x;
        break;
      }
  return fns.lines(process, p.stacks.frame(s)).back().function;
}

struct Accumulator {
  std::vector<double> durations;
  uint64_t instants = 0;
  std::unordered_map<FunctionId, uint64_t> on, off;
  uint64_t on_samples = 0, off_samples = 0;
};

std::vector<MarkerFunction> top(const std::unordered_map<FunctionId, uint64_t>& counts, uint64_t total,
                                const FunctionTable& fns, size_t limit) {
  std::vector<MarkerFunction> out;
  for (const auto& [f, n] : counts) out.push_back({fns.function(f).name, n, total ? 100.0 * n / total : 0});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.samples != b.samples ? a.samples > b.samples : a.name < b.name;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace

MarkerReport make_marker_report(const model::Profile& profile, size_t limit) {
  FunctionTable fns(profile);
  std::map<model::StringId, Accumulator> by_name;
  for (size_t pi = 0; pi < profile.processes.size(); ++pi)
    for (const model::Thread& t : profile.processes[pi].threads) {
      std::map<model::StringId, bool> names;
      for (const model::Marker& m : t.markers) {
        if (!m.program || m.name == model::kNoString) continue;
        Accumulator& a = by_name[m.name];
        if (m.phase == model::MarkerPhase::Interval && m.end_ns >= m.start_ns) {
          a.durations.push_back(static_cast<double>(m.end_ns - m.start_ns) / 1e6);
          names[m.name] = true;
        } else if (m.phase == model::MarkerPhase::Instant) {
          ++a.instants;
        }
      }
      for (const auto& [name, unused] : names) {
        Accumulator& a = by_name[name];
        const std::vector<bool> inside = model::samples_inside(t, name);
        for (size_t i = 0; i < t.samples.size(); ++i) {
          const model::StackId st = t.samples[i].stack;
          if (!inside[i] || st == model::kNoStack) continue;
          const bool off = off_cpu(profile, st);
          ++(off ? a.off_samples : a.on_samples);
          ++(off ? a.off : a.on)[charged_function(profile, fns, pi, st, off)];
        }
      }
    }
  MarkerReport r;
  for (auto& [name, a] : by_name) {
    MarkerStats s;
    s.name = profile.strings.get(name);
    std::sort(a.durations.begin(), a.durations.end());
    s.count = a.durations.size();
    s.instants = a.instants;
    for (double d : a.durations) s.total_ms += d;
    s.p50_ms = percentile(a.durations, 0.50);
    s.p90_ms = percentile(a.durations, 0.90);
    s.p99_ms = percentile(a.durations, 0.99);
    s.max_ms = a.durations.empty() ? 0 : a.durations.back();
    s.on_cpu_samples = a.on_samples;
    s.off_cpu_samples = a.off_samples;
    s.on_cpu = top(a.on, a.on_samples, fns, limit);
    s.off_cpu = top(a.off, a.off_samples, fns, limit);
    r.markers.push_back(std::move(s));
  }
  std::stable_sort(r.markers.begin(), r.markers.end(),
                   [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
  return r;
}

std::string format_marker_report(const MarkerReport& report) {
  std::string out;
  char buf[256];
  if (report.markers.empty()) return "no markers from the program in this profile\n";
  std::snprintf(buf, sizeof buf, "%-24s %8s %12s %10s %10s %10s %10s\n", "marker", "count", "total ms",
                "p50 ms", "p90 ms", "p99 ms", "max ms");
  out += buf;
  for (const MarkerStats& s : report.markers) {
    std::snprintf(buf, sizeof buf, "%-24s %8llu %12.3f %10.3f %10.3f %10.3f %10.3f",
                  terminal_safe(s.name).c_str(), static_cast<unsigned long long>(s.count), s.total_ms,
                  s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms);
    out += buf;
    if (s.instants) out += "  (+" + std::to_string(s.instants) + " instant)";
    out += '\n';
  }
  for (const MarkerStats& s : report.markers) {
    if (s.on_cpu.empty() && s.off_cpu.empty()) continue;
    out += "\n" + terminal_safe(s.name) + ": inside its intervals\n";
    auto list = [&](const char* what, uint64_t n, const std::vector<MarkerFunction>& fs) {
      if (fs.empty()) return;
      std::snprintf(buf, sizeof buf, "  %s (%llu samples):\n", what, static_cast<unsigned long long>(n));
      out += buf;
      for (const MarkerFunction& f : fs) {
        std::snprintf(buf, sizeof buf, "    %6.2f%%  ", f.percent);
        out += buf + terminal_safe(f.name) + "\n";
      }
    };
    list("on-CPU", s.on_cpu_samples, s.on_cpu);
    list("off-CPU", s.off_cpu_samples, s.off_cpu);
  }
  return out;
}

void write_marker_report_json(const MarkerReport& report, JsonWriter& w) {
  w.begin_object().key("markers").begin_array();
  for (const MarkerStats& s : report.markers) {
    w.begin_object().key("name").value(s.name).key("count").value(s.count).key("instants").value(s.instants);
    w.key("total_ms").value(s.total_ms).key("p50_ms").value(s.p50_ms).key("p90_ms").value(s.p90_ms);
    w.key("p99_ms").value(s.p99_ms).key("max_ms").value(s.max_ms);
    w.key("on_cpu_samples").value(s.on_cpu_samples).key("off_cpu_samples").value(s.off_cpu_samples);
    for (const auto* list : {&s.on_cpu, &s.off_cpu}) {
      w.key(list == &s.on_cpu ? "on_cpu" : "off_cpu").begin_array();
      for (const MarkerFunction& f : *list)
        w.begin_object()
            .key("name")
            .value(f.name)
            .key("samples")
            .value(f.samples)
            .key("percent")
            .value(f.percent)
            .end_object();
      w.end_array();
    }
    w.end_object();
  }
  w.end_array().end_object();
}

}  // namespace fxprof::sinks
