// `fxprof stat`'s output: perf stat's layout (value, event, '#' derived figure), then what the figures
// suggest, one sentence each, as the profiling guides read them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "base/json_writer.h"
#include "counters/stat.h"

namespace fxprof::counters {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// 1234567 -> "1,234,567" (perf's grouping).
std::string grouped(uint64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

const Count* find(const StatResult& r, std::string_view name) {
  for (size_t i = 0; i < r.events.size(); ++i)
    if (r.events[i].name == name && r.total[i].available) return &r.total[i];
  return nullptr;
}

std::string rate(double per_s) {
  if (per_s >= 1e9) return fmt("%8.3f G/sec", per_s / 1e9);
  if (per_s >= 1e6) return fmt("%8.3f M/sec", per_s / 1e6);
  if (per_s >= 1e3) return fmt("%8.3f K/sec", per_s / 1e3);
  return fmt("%8.3f /sec", per_s);
}

// perf's columns: the number right-aligned in 18, then the unit (or its width in spaces).
std::string value_text(const EventSpec& e, const Count& c) {
  char b[64];
  if (!c.available)
    std::snprintf(b, sizeof b, "%18s     ", c.kernel_only ? "<not counted>" : "<not supported>");
  else if (e.unit == "msec")
    std::snprintf(b, sizeof b, "%18.2f msec", static_cast<double>(c.value) / 1e6);
  else
    std::snprintf(b, sizeof b, "%18s     ", grouped(c.value).c_str());
  return b;
}

// The software events' figures: CPUs utilized, switches, migrations and faults per CPU second.
void derive_software(const StatResult& r, std::vector<Derived>& out) {
  const Count* clock = find(r, "task-clock");
  const double cpu_s = clock ? static_cast<double>(clock->value) / 1e9 : 0;
  if (clock && r.elapsed_s > 0) {
    const double u = cpu_s / r.elapsed_s;
    std::string s;
    if (u < 0.5)
      s = "The program was on a CPU " + fmt("%.0f", u * 100) +
          "% of the time: it mostly waited (I/O, locks, sleep, other processes); `fxprof record` shows "
          "where (its profiles are wall-clock).";
    else if (u > 1.5)
      s = "It kept " + fmt("%.1f", u) + " CPUs busy on average: the work ran in parallel.";
    else
      s = "It kept about one CPU busy: its time is CPU time, so a CPU profile explains it.";
    out.push_back({"task-clock", "CPUs utilized", u, fmt("%8.3f CPUs utilized", u), s});
  }
  auto per_s = [&](std::string_view ev, std::string sentence) {
    const Count* c = find(r, ev);
    if (!c || cpu_s <= 0) return;
    const double v = static_cast<double>(c->value) / cpu_s;
    out.push_back({std::string(ev), "per CPU second", v, rate(v), std::move(sentence)});
  };
  if (const Count* cs = find(r, "context-switches")) {
    const double v = cpu_s > 0 ? static_cast<double>(cs->value) / cpu_s : 0;
    per_s("context-switches",
          v > 1000 ? "Over 1,000 switches per CPU second: the threads block often (locks, small reads and "
                     "writes, sleeps) or are preempted; `fxprof record` names the waits."
                   : "Few switches: the threads ran without blocking much.");
  }
  if (find(r, "cpu-migrations"))
    per_s("cpu-migrations",
          "Migrations move a thread to a cold cache; they matter only at thousands per second.");
  const Count* pf = find(r, "page-faults");
  if (pf) {
    const double mib = static_cast<double>(pf->value) * 4096.0 / (1 << 20);
    const double rate_per_s = cpu_s > 0 ? static_cast<double>(pf->value) / cpu_s : 0;
    per_s(
        "page-faults",
        rate_per_s > 10000
            ? "Each fault is a page touched for the first time (or copied on write): " + grouped(pf->value) +
                  " faults are ~" + fmt("%.0f", mib) + " MiB at 4 KiB a page, a fault every " +
                  fmt("%.0f", 1e6 / rate_per_s) +
                  " us of CPU: memory allocated and freed again (reuse buffers) or a working set that grows; "
                  "`fxprof record -e page-faults` shows where."
            : "Few page faults for the CPU time: memory is not what this program spends its time on.");
  }
  if (const Count* mj = find(r, "major-faults"); mj && mj->value > 0)
    out.push_back({"major-faults", "major faults", static_cast<double>(mj->value), "",
                   "Major faults waited for the disk (files not in the page cache, or swap): a second "
                   "run is faster if the page cache keeps them."});
}

// The PMU's figures: GHz, IPC, cache and branch miss rates.
void derive_hardware(const StatResult& r, std::vector<Derived>& out) {
  const Count* clock = find(r, "task-clock");
  const Count* cyc = find(r, "cycles");
  if (cyc && clock && clock->value)
    out.push_back({"cycles", "GHz", static_cast<double>(cyc->value) / static_cast<double>(clock->value),
                   fmt("%8.3f GHz", static_cast<double>(cyc->value) / static_cast<double>(clock->value)),
                   ""});
  const Count* ins = find(r, "instructions");
  if (ins && cyc && cyc->value) {
    const double ipc = static_cast<double>(ins->value) / static_cast<double>(cyc->value);
    std::string s = ipc < 1.0 ? "IPC below 1: the CPU mostly stalls, most often waiting for memory (see the "
                                "cache misses)."
                    : ipc < 2.0
                        ? "IPC between 1 and 2: a mix of useful work and stalls."
                        : "IPC of 2 or more: the CPU is busy doing work; only less work (a better algorithm, "
                          "vectorised code) makes it faster.";
    out.push_back({"instructions", "insn per cycle", ipc, fmt("%8.2f insn per cycle", ipc), s});
  }
  const Count* refs = find(r, "cache-references");
  const Count* miss = find(r, "cache-misses");
  if (refs && miss && refs->value) {
    const double m = 100.0 * static_cast<double>(miss->value) / static_cast<double>(refs->value);
    out.push_back({"cache-misses", "% of all cache refs", m, fmt("%8.2f %% of all cache refs", m),
                   m > 5 ? "Above 5% of cache references miss: the data does not fit the caches; data layout "
                           "(contiguous arrays, smaller structures, blocking) matters."
                         : "Few cache references miss: the working set fits the caches."});
  }
  const Count* br = find(r, "branches");
  const Count* bm = find(r, "branch-misses");
  if (br && bm && br->value) {
    const double m = 100.0 * static_cast<double>(bm->value) / static_cast<double>(br->value);
    out.push_back({"branch-misses", "% of all branches", m, fmt("%8.2f %% of all branches", m),
                   m > 2 ? "Above 2% of branches are mispredicted: data-dependent branches cost; sorted data "
                           "or branch-free code helps."
                         : "Branches are well predicted."});
  }
}

}  // namespace

std::vector<Derived> derive(const StatResult& r) {
  std::vector<Derived> out;
  derive_software(r, out);
  derive_hardware(r, out);
  return out;
}

StatResult mean_of_runs(std::vector<StatResult> runs) {
  StatResult r = std::move(runs.back());
  const auto n = static_cast<double>(runs.size());
  r.runs = static_cast<uint32_t>(runs.size());
  if (runs.size() < 2) return r;
  r.processes.clear();
  r.stddev_percent.assign(r.events.size(), 0);
  double elapsed = 0;
  for (const StatResult& run : runs) elapsed += run.elapsed_s;
  r.elapsed_s = elapsed / n;
  for (size_t e = 0; e < r.events.size(); ++e) {
    double sum = 0, sq = 0;
    for (const StatResult& run : runs) {
      const auto v = static_cast<double>(e < run.total.size() ? run.total[e].value : 0);
      sum += v;
      sq += v * v;
    }
    const double mean = sum / n;
    const double var = std::max(0.0, (sq - n * mean * mean) / (n - 1));
    r.total[e].value = static_cast<uint64_t>(mean + 0.5);
    // perf stat -r's "( +- x% )": the standard deviation of the mean, relative to the mean.
    r.stddev_percent[e] = mean > 0 ? 100.0 * std::sqrt(var / n) / mean : 0;
  }
  return r;
}

std::string format_stat(const StatResult& r) {
  std::string cmd;
  for (const std::string& a : r.command) cmd += (cmd.empty() ? "" : " ") + a;
  std::string out = "\n Performance counter stats for '" + cmd + "'" +
                    (r.user_only ? " (user space only)" : "") +
                    (r.runs > 1 ? " (" + std::to_string(r.runs) + " runs)" : std::string()) + ":\n\n";
  const auto derived = derive(r);
  for (size_t i = 0; i < r.events.size(); ++i) {
    const EventSpec& e = r.events[i];
    char b[160];
    std::snprintf(b, sizeof b, "%s %-32s", value_text(e, r.total[i]).c_str(), e.name.c_str());
    std::string line = b;
    for (const Derived& d : derived)
      if (d.event == e.name && !d.annotation.empty()) {
        line += " # " + d.annotation;
        break;
      }
    if (r.total[i].available && r.total[i].running < 0.999)
      line += fmt("  (%.2f%%)", r.total[i].running * 100);
    if (r.total[i].available && i < r.stddev_percent.size())
      line += fmt("  ( +- %.2f%% )", r.stddev_percent[i]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += fmt("\n%18.9f seconds time elapsed\n", r.elapsed_s);
  if (r.processes.size() > 1) {
    // The ten with the largest first count (task-clock by default); --json has them all.
    std::vector<const ProcessCounts*> shown;
    for (const ProcessCounts& p : r.processes) shown.push_back(&p);
    std::stable_sort(shown.begin(), shown.end(), [](const ProcessCounts* a, const ProcessCounts* b) {
      return !a->values.empty() && !b->values.empty() && a->values[0] > b->values[0];
    });
    const size_t more = shown.size() > 10 ? shown.size() - 10 : 0;
    shown.resize(shown.size() - more);
    out += "\n Per process" + std::string(more ? " (the ten largest)" : "") + ":\n";
    for (const ProcessCounts* pp : shown) {
      const ProcessCounts& p = *pp;
      std::string l = fmt("%10.0f ", static_cast<double>(p.pid)) + p.name + ":";
      for (size_t i = 0; i < r.events.size(); ++i) {
        if (!r.total[i].available) continue;
        const EventSpec& e = r.events[i];
        l += " " +
             (e.unit == "msec" ? fmt("%.2f msec", static_cast<double>(p.values[i]) / 1e6)
                               : grouped(p.values[i])) +
             " " + e.name + (i + 1 < r.events.size() ? "," : "");
      }
      while (!l.empty() && l.back() == ',') l.pop_back();
      out += l + "\n";
    }
    if (more) out += fmt("%10.0f", static_cast<double>(more)) + " more processes (--json lists them)\n";
  }
  bool any = false;
  for (const Derived& d : derived) {
    if (d.sentence.empty()) continue;
    if (!any) out += "\n What they suggest:\n";
    any = true;
    out += "  - " + d.sentence + "\n";
  }
  return out;
}

std::string format_stat_json(const StatResult& r) {
  std::string s;
  {
    JsonWriter w(s);
    w.begin_object();
    w.key("command").begin_array();
    for (const std::string& a : r.command) w.value(a);
    w.end_array();
    w.key("exitStatus").value(r.exit_status);
    w.key("elapsedSeconds").value(r.elapsed_s);
    w.key("pmu").value(r.pmu);
    w.key("userOnly").value(r.user_only);
    w.key("runs").value(r.runs);
    w.key("events").begin_array();
    for (size_t i = 0; i < r.events.size(); ++i) {
      w.begin_object().key("name").value(r.events[i].name);
      w.key("value");
      if (r.total[i].available)
        w.value(r.total[i].value);
      else
        w.null();
      w.key("unit").value(r.events[i].unit == "msec" ? "ns" : "");
      w.key("available").value(r.total[i].available);
      w.key("running").value(r.total[i].running);
      if (i < r.stddev_percent.size()) w.key("stddevPercent").value(r.stddev_percent[i]);
      w.end_object();
    }
    w.end_array();
    w.key("derived").begin_array();
    for (const Derived& d : derive(r))
      w.begin_object()
          .key("event")
          .value(d.event)
          .key("name")
          .value(d.name)
          .key("value")
          .value(d.value)
          .key("text")
          .value(d.sentence)
          .end_object();
    w.end_array();
    w.key("processes").begin_array();
    for (const ProcessCounts& p : r.processes) {
      w.begin_object().key("pid").value(p.pid).key("name").value(p.name).key("counts").begin_object();
      for (size_t i = 0; i < r.events.size(); ++i)
        if (r.total[i].available) w.key(r.events[i].name).value(p.values[i]);
      w.end_object().end_object();
    }
    w.end_array();
    w.key("notices").begin_array();
    for (const std::string& n : r.notices) w.value(n);
    w.end_array();
    w.end_object();
  }
  s += "\n";
  return s;
}

}  // namespace fxprof::counters
