#include "sinks/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "base/terminal.h"
#include "sinks/output.h"

namespace fxprof::sinks {
namespace {

double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The variance of a share of `percent_share`% measured on `n` samples (Agresti-Coull: z^2 more samples, half
// of them hits, so that a share of 0 -- a function new in one profile -- still has a variance).
double share_variance(double percent_share, uint64_t n) {
  constexpr double z2 = 1.96 * 1.96;
  const double nn = static_cast<double>(n) + z2;
  const double p = (percent_share / 100 * static_cast<double>(n) + z2 / 2) / nn;
  return p * (1 - p) / nn;
}

// The sampling margin of a change from `base` to `next` (percent of each side's samples): the half-width of
// the 95% interval of the difference of two binomial shares, in points.
double margin(double base, uint64_t base_n, double next, uint64_t next_n) {
  if (base_n == 0 || next_n == 0) return 0;
  return 100 * 1.96 * std::sqrt(share_variance(base, base_n) + share_variance(next, next_n));
}

// What the shares are of, for the table's first line.
const char* clock_samples(Clock c) {
  return c == Clock::Cpu       ? "on-CPU"
         : c == Clock::Program ? "on-CPU and blocked (not preempted)"
                               : "wall-clock";
}

// "" when neither side lost records, else a line saying how far their shares can be off.
std::string lost_line(const Diff& d) {
  if (d.base_lost == 0 && d.new_lost == 0) return std::string();
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "records lost (ring buffer overflow): base %llu, new %llu: their shares can be off by up to "
                "%.2f and %.2f points, which the gate's margin includes\n",
                static_cast<unsigned long long>(d.base_lost), static_cast<unsigned long long>(d.new_lost),
                d.base_lost_bound, d.new_lost_bound);
  return buf;
}

// A name without its parameter list: "ns::f<int>(char const*) const" -> "ns::f<int>".
std::string_view without_params(std::string_view n) {
  int depth = 0;
  for (size_t i = 1; i < n.size(); ++i) {
    if (n[i] == '<') ++depth;
    if (n[i] == '>' && depth > 0) --depth;
    if (n[i] == '(' && depth == 0) return n.substr(0, i);
  }
  return n;
}

// The bare name: no parameters, no trailing template arguments, no namespace or class.
std::string_view bare_name(std::string_view n) {
  n = without_params(n);
  if (n.ends_with('>')) {
    int depth = 0;
    for (size_t i = n.size(); i-- > 0;) {
      if (n[i] == '>') ++depth;
      if (n[i] == '<' && --depth == 0) {
        n = n.substr(0, i);
        break;
      }
    }
  }
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i + 1 < n.size(); ++i) {
    if (n[i] == '<') ++depth;
    if (n[i] == '>' && depth > 0) --depth;
    if (depth == 0 && n[i] == ':' && n[i + 1] == ':') start = i + 2;
  }
  return n.substr(start);
}

}  // namespace

bool function_matches(std::string_view name, std::string_view query) {
  return !query.empty() && (name == query || without_params(name) == query || bare_name(name) == query);
}

Diff diff_runs(std::span<const model::Profile> base, std::span<const model::Profile> next, bool inlined,
               Clock clock) {
  TreeOptions to;
  to.inlined = inlined;
  to.clock = clock == Clock::Wall ? Clock::Program : clock;  // never the machine's preemptions
  Diff d;
  d.clock = to.clock;
  d.base_runs = base.size();
  d.new_runs = next.size();
  // Each run's shares per function name (same-named functions of two libs add up).
  struct Shares {
    std::vector<double> self, total;  // one per run; a function missing from a run has 0 there
  };
  std::unordered_map<std::string, size_t> row_of;
  std::vector<Shares> base_shares, new_shares;
  auto row = [&](const std::string& name) -> size_t {
    auto [it, inserted] = row_of.try_emplace(name, d.rows.size());
    if (inserted) {
      d.rows.push_back({name});
      base_shares.push_back({std::vector<double>(base.size()), std::vector<double>(base.size())});
      new_shares.push_back({std::vector<double>(next.size()), std::vector<double>(next.size())});
    }
    return it->second;
  };
  auto add_side = [&](std::span<const model::Profile> runs, std::vector<Shares>& shares, uint64_t& samples,
                      uint64_t& lost, double& lost_bound) {
    for (size_t run = 0; run < runs.size(); ++run) {
      FunctionTable f(runs[run]);
      CallTree t = CallTree::build(runs[run], f, to);
      samples += t.total_samples();
      const uint64_t run_lost = runs[run].meta.lost_records();
      lost += run_lost;
      lost_bound += percent(run_lost, t.total_samples() + run_lost) / static_cast<double>(runs.size());
      for (const auto& st : t.function_stats()) {
        const size_t r = row(f.function(st.function).name);
        shares[r].self[run] += percent(st.self, t.total_samples());
        shares[r].total[run] += percent(st.total, t.total_samples());
      }
    }
  };
  add_side(base, base_shares, d.base_samples, d.base_lost, d.base_lost_bound);
  add_side(next, new_shares, d.new_samples, d.new_lost, d.new_lost_bound);
  const double lost_bound = d.base_lost_bound + d.new_lost_bound;
  auto mean_and_range = [](const std::vector<double>& v, double& mean, double& range) {
    if (v.empty()) return;
    double sum = 0;
    for (double x : v) sum += x;
    mean = sum / static_cast<double>(v.size());
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    range = *hi - *lo;
  };
  for (size_t r = 0; r < d.rows.size(); ++r) {
    DiffRow& row = d.rows[r];
    mean_and_range(base_shares[r].self, row.base_self, row.base_self_spread);
    mean_and_range(base_shares[r].total, row.base_total, row.base_total_spread);
    mean_and_range(new_shares[r].self, row.new_self, row.new_self_spread);
    mean_and_range(new_shares[r].total, row.new_total, row.new_total_spread);
    row.self_margin = margin(row.base_self, d.base_samples, row.new_self, d.new_samples) + lost_bound;
    row.total_margin = margin(row.base_total, d.base_samples, row.new_total, d.new_samples) + lost_bound;
  }
  std::stable_sort(d.rows.begin(), d.rows.end(), [](const DiffRow& a, const DiffRow& b) {
    const double sa = std::fabs(a.self_change()), sb = std::fabs(b.self_change());
    if (std::fabs(sa - sb) > 1e-9) return sa > sb;
    const double ta = std::fabs(a.total_change()), tb = std::fabs(b.total_change());
    if (std::fabs(ta - tb) > 1e-9) return ta > tb;
    return a.self_change() > b.self_change();  // a tie: growth first
  });
  return d;
}

Diff diff_profiles(const model::Profile& base, const model::Profile& next, bool inlined, Clock clock) {
  return diff_runs(std::span(&base, 1), std::span(&next, 1), inlined, clock);
}

std::string format_diff(const Diff& d, size_t limit) {
  const bool spread = d.base_runs > 1 || d.new_runs > 1;
  const char* kind = clock_samples(d.clock);
  std::string out;
  char buf[320];
  if (spread)
    std::snprintf(
        buf, sizeof buf,
        "base %zu runs, %llu %s samples; new %zu runs, %llu samples; shares are means of each run's "
        "share, spread the widest range of a side's runs\n",
        d.base_runs, static_cast<unsigned long long>(d.base_samples), kind, d.new_runs,
        static_cast<unsigned long long>(d.new_samples));
  else
    std::snprintf(buf, sizeof buf,
                  "base %llu %s samples, new %llu samples; shares are of each profile's samples\n",
                  static_cast<unsigned long long>(d.base_samples), kind,
                  static_cast<unsigned long long>(d.new_samples));
  out += buf;
  out += lost_line(d);
  out += spread ? "   self: base     new   change  spread   total: base     new   change  spread  function\n"
                : "   self: base     new   change   total: base     new   change  function\n";
  for (size_t i = 0; i < d.rows.size() && i < limit; ++i) {
    const DiffRow& r = d.rows[i];
    if (spread)
      std::snprintf(buf, sizeof buf,
                    "      %6.2f%% %6.2f%% %+7.2f%% %6.2f         %6.2f%% %6.2f%% %+7.2f%% %6.2f  ",
                    r.base_self, r.new_self, r.self_change(), r.self_noise(), r.base_total, r.new_total,
                    r.total_change(), r.total_noise());
    else
      std::snprintf(buf, sizeof buf, "      %6.2f%% %6.2f%% %+7.2f%%        %6.2f%% %6.2f%% %+7.2f%%  ",
                    r.base_self, r.new_self, r.self_change(), r.base_total, r.new_total, r.total_change());
    out += buf;
    out += terminal_safe(r.name);
    out += '\n';
  }
  return out;
}

std::string format_diff_markdown(const Diff& d, size_t limit, const std::string& verdict) {
  std::string out;
  if (!verdict.empty()) out += "**" + verdict + "**\n\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "Base: %zu run(s), %llu %s samples. New: %zu run(s), %llu samples.\n\n",
                d.base_runs, static_cast<unsigned long long>(d.base_samples), clock_samples(d.clock),
                d.new_runs, static_cast<unsigned long long>(d.new_samples));
  out += buf;
  if (std::string lost = lost_line(d); !lost.empty()) out += lost + "\n";
  out +=
      "| function | self base | self new | self change | total base | total new | total change | spread |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < d.rows.size() && i < limit; ++i) {
    const DiffRow& r = d.rows[i];
    std::string name;
    for (char ch : r.name) {
      if (ch == '|' || ch == '`' || ch == '*' || ch == '_' || ch == '<' || ch == '>') name += '\\';
      name += static_cast<unsigned char>(ch) < 0x20 ? ' ' : ch;
    }
    std::snprintf(buf, sizeof buf, " | %.2f%% | %.2f%% | %+.2f | %.2f%% | %.2f%% | %+.2f | %.2f |\n",
                  r.base_self, r.new_self, r.self_change(), r.base_total, r.new_total, r.total_change(),
                  r.self_noise());
    out += "| " + name + buf;
  }
  return out;
}

std::vector<const DiffRow*> gate_failures(const Diff& d, double threshold, const std::string& function) {
  std::vector<const DiffRow*> out;
  for (const DiffRow& r : d.rows) {
    if (!function.empty()) {
      if (function_matches(r.name, function) && r.total_change() > threshold + r.total_margin &&
          r.total_change() > r.total_noise())
        out.push_back(&r);
    } else if (r.self_change() > threshold + r.self_margin && r.self_change() > r.self_noise()) {
      out.push_back(&r);
    }
  }
  return out;
}

Status write_diff_svg(const model::Profile& base, const model::Profile& next, const std::string& path,
                      SvgOptions options) {
  FunctionTable bf(base), nf(next);
  CallTree bt = CallTree::build(base, bf, options.tree), nt = CallTree::build(next, nf, options.tree);
  // For each node of NEW, the node of BASE with the same path of names (kNone if BASE never had it).
  std::unordered_map<std::string, uint32_t> base_child;  // base parent id + '\0' + name
  for (uint32_t i = 1; i < bt.nodes().size(); ++i)
    base_child.emplace(std::to_string(bt.node(i).parent) + '\0' + bf.function(bt.node(i).function).name, i);
  std::vector<uint32_t> match(nt.nodes().size(), CallTree::kNone);
  match[0] = 0;
  for (uint32_t i = 1; i < nt.nodes().size(); ++i) {
    uint32_t bp = match[nt.node(i).parent];
    if (bp == CallTree::kNone) continue;
    auto it = base_child.find(std::to_string(bp) + '\0' + nf.function(nt.node(i).function).name);
    if (it != base_child.end()) match[i] = it->second;
  }
  std::vector<double> change(nt.nodes().size(), 0);  // percentage points of total share
  double max_change = 0;
  for (uint32_t i = 1; i < nt.nodes().size(); ++i) {
    const double now = percent(nt.node(i).total, nt.total_samples());
    const double before =
        match[i] == CallTree::kNone ? 0 : percent(bt.node(match[i]).total, bt.total_samples());
    change[i] = now - before;
    max_change = std::max(max_change, std::fabs(change[i]));
  }
  options.delta = [&](uint32_t n) { return max_change > 0 ? change[n] / max_change : 0.0; };
  options.extra_details = [&](uint32_t n) {
    char buf[64];
    if (n == 0) return std::string();
    if (match[n] == CallTree::kNone) return std::string(", new in this profile");
    std::snprintf(buf, sizeof buf, ", %+.2f%% of samples vs base", change[n]);
    return std::string(buf);
  };
  if (options.title == "Flame Graph") options.title = "Differential Flame Graph";
  options.detail_suffix_doc = "width: new profile; red: share grew, blue: share shrank (vs base)";
  auto out = open_output(path);
  if (!out) return std::move(out).take_error();
  write_flamegraph_svg(nt, nf, options, **out);
  return (*out)->finish();
}

}  // namespace fxprof::sinks
