#include "sinks/heap_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "sinks/diff.h"
#include "sinks/functions.h"
#include "sinks/heap_report.h"

namespace fxprof::sinks {
namespace {

// Whether each stack of one process contains a suppressed function: memoised along prefixes, so each
// stack is looked at once however many rows share it.
class SuppressedStacks {
 public:
  SuppressedStacks(const model::Profile& p, FunctionTable& functions, std::span<const std::string> names)
      : p_(p), functions_(functions), names_(names) {}
  bool contains(size_t proc, model::StackId stack) {
    if (proc != proc_) {
      proc_ = proc;
      memo_.assign(p_.stacks.size(), kUnknown);
    }
    // The unknown stacks from the leaf down to the first known one, then decided root first.
    path_.clear();
    model::StackId s = stack;
    while (s != model::kNoStack && memo_[s] == kUnknown) {
      path_.push_back(s);
      s = p_.stacks.prefix(s);
    }
    uint8_t below = s == model::kNoStack ? kNo : memo_[s];
    for (auto it = path_.rbegin(); it != path_.rend(); ++it)
      below = memo_[*it] = below == kYes || frame_matches(proc, p_.stacks.frame(*it)) ? kYes : kNo;
    return stack != model::kNoStack && memo_[stack] == kYes;
  }

 private:
  static constexpr uint8_t kUnknown = 0, kNo = 1, kYes = 2;
  bool frame_matches(size_t proc, model::FrameId f) {
    for (const FrameLine& l : functions_.lines(proc, f)) {
      if (l.function >= by_function_.size()) by_function_.resize(l.function + 1, kUnknown);
      uint8_t& m = by_function_[l.function];
      if (m == kUnknown) {
        const std::string& name = functions_.function(l.function).name;
        m = std::any_of(names_.begin(), names_.end(),
                        [&](const std::string& q) { return function_matches(name, q); })
                ? kYes
                : kNo;
      }
      if (m == kYes) return true;
    }
    return false;
  }
  const model::Profile& p_;
  FunctionTable& functions_;
  std::span<const std::string> names_;
  size_t proc_ = SIZE_MAX;
  std::vector<uint8_t> memo_;         // per stack of process proc_
  std::vector<uint8_t> by_function_;  // per function id
  std::vector<model::StackId> path_;
};

// The 95% half-width of a change between two estimated totals (0 for a full-mode side).
int64_t change_margin(const HeapReport& a, int64_t x, const HeapReport& b, int64_t y) {
  const double ex = a.sampled ? static_cast<double>(heap_sampling_error(x, a.rate_bytes)) : 0;
  const double ey = b.sampled ? static_cast<double>(heap_sampling_error(y, b.rate_bytes)) : 0;
  return static_cast<int64_t>(std::sqrt(ex * ex + ey * ey));
}

int64_t biggest_change(const HeapDiffRow& r) {
  return std::max(std::llabs(r.bytes_change()), std::llabs(r.leaked_change()));
}

std::string signed_bytes(int64_t b) { return (b > 0 ? "+" : "") + heap_bytes_text(b); }

// A site's function: its name without the " (lib)" the report adds.
std::string_view site_function(std::string_view site) {
  const size_t lib = site.rfind(" (");
  return lib != std::string_view::npos && site.ends_with(')') ? site.substr(0, lib) : site;
}

}  // namespace

Suppressed suppress_allocations(model::Profile& profile, std::span<const std::string> functions) {
  Suppressed out;
  if (functions.empty()) return out;
  FunctionTable table(profile);
  SuppressedStacks stacks(profile, table, functions);
  for (size_t pi = 0; pi < profile.processes.size(); ++pi)
    for (model::Thread& t : profile.processes[pi].threads) {
      // A free row carries its allocation's stack (heap/source.cpp), so both go together.
      const size_t before = t.allocations.size();
      std::erase_if(t.allocations, [&](const model::Allocation& a) {
        if (!stacks.contains(pi, a.stack)) return false;
        if (a.bytes >= 0) {
          out.allocations += a.count;
          out.bytes += a.bytes;
        }
        return true;
      });
      out.rows += before - t.allocations.size();
    }
  return out;
}

HeapDiff diff_heaps(const model::Profile& base, const model::Profile& next) {
  const HeapReport b = make_heap_report(base, SIZE_MAX), n = make_heap_report(next, SIZE_MAX);
  HeapDiff d;
  d.sampled = b.sampled || n.sampled;
  d.base_bytes = b.bytes_allocated;
  d.new_bytes = n.bytes_allocated;
  d.base_leaked = b.leaked_bytes;
  d.new_leaked = n.leaked_bytes;
  d.base_count = b.allocations;
  d.new_count = n.allocations;
  std::unordered_map<std::string, size_t> row_of;
  auto row = [&](const std::string& name) -> HeapDiffRow& {
    auto [it, fresh] = row_of.try_emplace(name, d.rows.size());
    if (fresh) d.rows.push_back({name});
    return d.rows[it->second];
  };
  for (const HeapSite& s : b.top_alloc_sites)
    row(s.name).base_bytes = s.bytes, row(s.name).base_count = s.count;
  for (const HeapSite& s : n.top_alloc_sites)
    row(s.name).new_bytes = s.bytes, row(s.name).new_count = s.count;
  for (const HeapSite& s : b.top_leak_sites)
    row(s.name).base_leaked = s.bytes, row(s.name).base_leaked_count = s.count;
  for (const HeapSite& s : n.top_leak_sites)
    row(s.name).new_leaked = s.bytes, row(s.name).new_leaked_count = s.count;
  for (HeapDiffRow& r : d.rows) {
    r.bytes_margin = change_margin(b, r.base_bytes, n, r.new_bytes);
    r.leaked_margin = change_margin(b, r.base_leaked, n, r.new_leaked);
  }
  std::sort(d.rows.begin(), d.rows.end(), [](const HeapDiffRow& x, const HeapDiffRow& y) {
    const int64_t cx = biggest_change(x), cy = biggest_change(y);
    return cx != cy ? cx > cy : x.name < y.name;
  });
  return d;
}

std::string format_heap_diff(const HeapDiff& d, size_t limit) {
  std::string out;
  char line[1024];
  std::snprintf(
      line, sizeof line, "Heap: allocated %s -> %s (%s) in %llu -> %llu blocks; leaked %s -> %s (%s)%s\n",
      heap_bytes_text(d.base_bytes).c_str(), heap_bytes_text(d.new_bytes).c_str(),
      signed_bytes(d.new_bytes - d.base_bytes).c_str(), static_cast<unsigned long long>(d.base_count),
      static_cast<unsigned long long>(d.new_count), heap_bytes_text(d.base_leaked).c_str(),
      heap_bytes_text(d.new_leaked).c_str(), signed_bytes(d.new_leaked - d.base_leaked).c_str(),
      d.sampled ? " (sampled: estimates; counts are samples)" : "");
  out += line;
  std::snprintf(line, sizeof line, "%10s %10s %10s %13s %10s %10s %10s  %s\n", "allocated", "new",
                "change", "blocks", "leaked", "new", "change", "site");
  out += line;
  for (size_t i = 0; i < d.rows.size() && i < limit; ++i) {
    const HeapDiffRow& r = d.rows[i];
    const std::string blocks = std::to_string(r.base_count) + " -> " + std::to_string(r.new_count);
    std::snprintf(line, sizeof line, "%10s %10s %10s %13s %10s %10s %10s  %s\n",
                  heap_bytes_text(r.base_bytes).c_str(), heap_bytes_text(r.new_bytes).c_str(),
                  signed_bytes(r.bytes_change()).c_str(), blocks.c_str(),
                  heap_bytes_text(r.base_leaked).c_str(), heap_bytes_text(r.new_leaked).c_str(),
                  signed_bytes(r.leaked_change()).c_str(), r.name.c_str());
    out += line;
  }
  if (d.rows.empty()) out += "  (no allocations on either side)\n";
  return out;
}

std::vector<const HeapDiffRow*> heap_gate_failures(const HeapDiff& d, double percent,
                                                   const std::string& function) {
  const double limit = percent / 100.0 * static_cast<double>(d.base_bytes);
  std::vector<const HeapDiffRow*> out;
  for (const HeapDiffRow& r : d.rows) {
    if (!function.empty() && !function_matches(site_function(r.name), function)) continue;
    if (static_cast<double>(r.bytes_change()) > limit + static_cast<double>(r.bytes_margin) ||
        static_cast<double>(r.leaked_change()) > limit + static_cast<double>(r.leaked_margin))
      out.push_back(&r);
  }
  return out;
}

}  // namespace fxprof::sinks
