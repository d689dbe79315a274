#include "exporter/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "base/terminal.h"
#include "exporter/output.h"

namespace fxprof::exporter {
namespace {

double percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

Diff diff_profiles(const model::Profile& base, const model::Profile& next, bool inlined) {
  TreeOptions to;
  to.inlined = inlined;
  FunctionTable bf(base), nf(next);
  CallTree bt = CallTree::build(base, bf, to), nt = CallTree::build(next, nf, to);
  Diff d;
  d.base_samples = bt.total_samples();
  d.new_samples = nt.total_samples();
  std::unordered_map<std::string, size_t> row_of;
  auto row = [&](const std::string& name) -> DiffRow& {
    auto [it, inserted] = row_of.try_emplace(name, d.rows.size());
    if (inserted) d.rows.push_back({name});
    return d.rows[it->second];
  };
  for (const auto& st : bt.function_stats()) {
    DiffRow& r = row(bf.function(st.function).name);
    r.base_self += percent(st.self, d.base_samples);
    r.base_total += percent(st.total, d.base_samples);  // same-named functions of two libs add up
  }
  for (const auto& st : nt.function_stats()) {
    DiffRow& r = row(nf.function(st.function).name);
    r.new_self += percent(st.self, d.new_samples);
    r.new_total += percent(st.total, d.new_samples);
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

std::string format_diff(const Diff& d, size_t limit) {
  std::string out;
  char buf[160];
  std::snprintf(
      buf, sizeof buf, "base %llu samples, new %llu samples; shares are of each profile's samples\n",
      static_cast<unsigned long long>(d.base_samples), static_cast<unsigned long long>(d.new_samples));
  out += buf;
  out += "   self: base     new   change   total: base     new   change  function\n";
  for (size_t i = 0; i < d.rows.size() && i < limit; ++i) {
    const DiffRow& r = d.rows[i];
    std::snprintf(buf, sizeof buf, "      %6.2f%% %6.2f%% %+7.2f%%        %6.2f%% %6.2f%% %+7.2f%%  ",
                  r.base_self, r.new_self, r.self_change(), r.base_total, r.new_total, r.total_change());
    out += buf;
    out += terminal_safe(r.name);
    out += '\n';
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

}  // namespace fxprof::exporter
