#include "sinks/heap_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <unordered_map>

#include "sinks/functions.h"

namespace fxprof::sinks {
namespace {

constexpr size_t kMaxPath = 24;

bool allocator_lib(std::string_view name) {
  return name.starts_with("libc.so") || name.starts_with("libstdc++") || name.starts_with("libgcc_s") ||
         name.starts_with("ld-linux") || name.starts_with("libfxprof_heap");
}

// Where a stack allocated: the stack whose leaf is its first frame outside the allocator's libraries.
class SiteFinder {
 public:
  explicit SiteFinder(const model::Profile& p) : p_(p), functions_(p) {}

  // A site: where a process's stack allocated, as a dense index (see proc_of(), stack_of(), name_id()).
  // Says how many rows process `proc` has, before site() is asked for them.
  void expect(size_t proc, size_t rows) {
    if (proc >= site_of_.size()) site_of_.resize(proc + 1);
    // Dense for a process with many rows (a full-mode profile: a row per few allocations, on 100k+ distinct
    // stacks), where a hash map's lookups were much of the report; hashed for the others (a process per
    // file of a build would make thousands of tables of every stack of the profile).
    if (rows * 4 >= p_.stacks.size() && site_of_[proc].empty())
      site_of_[proc].assign(p_.stacks.size() + 1, kUnknown);  // the last: kNoStack's
  }
  uint32_t site(size_t proc, model::StackId stack) {
    if (proc >= site_of_.size()) site_of_.resize(proc + 1);
    std::vector<uint32_t>& dense = site_of_[proc];
    uint32_t& cached = dense.empty()
                           ? sparse_.try_emplace(uint64_t{proc} << 32 | stack, kUnknown).first->second
                           : dense[stack == model::kNoStack ? p_.stacks.size() : stack];
    if (cached != kUnknown) return cached;
    const model::StackId at = site_stack(proc, stack);
    auto [it, fresh] = site_ids_.try_emplace(uint64_t{proc} << 32 | at, static_cast<uint32_t>(sites_.size()));
    if (fresh) sites_.push_back({static_cast<uint32_t>(proc), at, kUnknown});
    cached = it->second;
    return cached;
  }
  size_t proc_of(uint32_t site) const { return sites_[site].proc; }
  model::StackId stack_of(uint32_t site) const { return sites_[site].stack; }

  // The site's name, "function (lib)", as an index into names(): made once per function, where making the
  // text for each of a full-mode profile's 100k+ site stacks, four times over, was most of the report's time.
  uint32_t name_id(uint32_t site) {
    Site& st = sites_[site];
    if (st.name != kUnknown) return st.name;
    if (st.stack == model::kNoStack) return st.name = intern_name("(no stack)");
    const FunctionId f = functions_.lines(st.proc, p_.stacks.frame(st.stack))[0].function;
    if (f >= by_function_.size()) by_function_.resize(f + 1, kUnknown);
    if (by_function_[f] == kUnknown) by_function_[f] = intern_name(name(functions_.function(f)));
    return st.name = by_function_[f];
  }
  const std::vector<std::string>& names() const { return names_; }

  std::vector<std::string> path(size_t proc, model::StackId s) {
    std::vector<std::string> out;
    for (; s != model::kNoStack && out.size() < kMaxPath; s = p_.stacks.prefix(s)) {
      auto lines = functions_.lines(proc, p_.stacks.frame(s));
      for (auto it = lines.rbegin(); it != lines.rend() && out.size() < kMaxPath; ++it)
        out.push_back(functions_.function(it->function).name);
    }
    return out;
  }

 private:
  static constexpr uint32_t kUnknown = UINT32_MAX;
  struct Site {
    uint32_t proc;
    model::StackId stack;
    uint32_t name;  // kUnknown until asked
  };
  model::StackId site_stack(size_t proc, model::StackId stack) {
    // By whole inline runs (a symbolicated address is frames of depth n..0): a site is the function the code
    // is in, whatever the allocator calls inlined into it.
    model::StackId s = stack;
    while (s != model::kNoStack) {
      while (p_.frames.get(p_.stacks.frame(s)).inline_depth > 0 && p_.stacks.prefix(s) != model::kNoStack)
        s = p_.stacks.prefix(s);
      if (!is_allocator(proc, p_.stacks.frame(s))) break;
      s = p_.stacks.prefix(s);
    }
    return s == model::kNoStack ? stack : s;
  }
  // "function (lib)", or what names an address the symbols do not cover.
  std::string name(const Function& fn) const {
    if (fn.lib < 0 || fn.name.find("+0x") != std::string::npos) return fn.name;  // "lib+0x..." already
    const std::string& lib = functions_.libs()[static_cast<size_t>(fn.lib)].name;
    if (fn.name.starts_with("0x")) return lib + "+" + fn.name;  // an address the symbols do not cover
    return fn.name + " (" + lib + ")";
  }
  uint32_t intern_name(std::string text) {
    auto [it, fresh] = name_ids_.try_emplace(std::move(text), static_cast<uint32_t>(names_.size()));
    if (fresh) names_.push_back(it->first);
    return it->second;
  }
  bool is_allocator(size_t proc, model::FrameId f) {
    const Function& fn = functions_.function(functions_.lines(proc, f)[0].function);
    return (fn.lib >= 0 && allocator_lib(functions_.libs()[static_cast<size_t>(fn.lib)].name)) ||
           allocator_function(fn.name);
  }
  // Rust's allocator shims, linked into every Rust program: the site is their caller.
  static bool allocator_function(std::string_view name) {
    return name.starts_with("alloc::alloc::") || name.starts_with("__rust_") || name.starts_with("__rdl_") ||
           name.starts_with("__rg_") || name.starts_with("std::alloc::") ||
           name.starts_with("<alloc::alloc::") || name.starts_with("<std::alloc::");
  }
  const model::Profile& p_;
  FunctionTable functions_;
  std::vector<std::vector<uint32_t>> site_of_;       // per process: stack -> its site (kUnknown: not yet)
  std::unordered_map<uint64_t, uint32_t> site_ids_;  // (process, site stack) -> site
  std::unordered_map<uint64_t, uint32_t> sparse_;    // (process, stack) -> its site, for the others
  std::vector<Site> sites_;
  std::vector<uint32_t> by_function_;  // function -> name id
  std::unordered_map<std::string, uint32_t> name_ids_;
  std::vector<std::string> names_;
};

// Blocks per site, then per site name, ranked.
class SiteTally {
 public:
  void add(uint32_t site, int64_t bytes, uint64_t count) {
    if (site >= by_site_.size()) by_site_.resize(std::max<size_t>(site + 1, by_site_.size() * 2));
    Entry& e = by_site_[site];
    if (!e.used) touched_.push_back(site);
    e.used = true;
    e.bytes += bytes;
    e.count += count;
  }
  std::vector<HeapSite> top(SiteFinder& sites, size_t limit, bool by_count) {
    struct Named {
      HeapSite site;
      uint32_t best_site = 0;
      int64_t best = -1;
      bool seen = false;
    };
    std::vector<Named> named;  // by name id
    for (uint32_t site : touched_) {
      const Entry& e = by_site_[site];
      const uint32_t id = sites.name_id(site);
      if (id >= named.size()) named.resize(id + 1);
      Named& n = named[id];
      n.seen = true;
      n.site.bytes += e.bytes;
      n.site.count += e.count;
      const int64_t weight = by_count ? static_cast<int64_t>(e.count) : e.bytes;
      if (weight > n.best) {
        n.best = weight;
        n.best_site = site;
      }
    }
    std::vector<Named*> ranked;
    for (uint32_t id = 0; id < named.size(); ++id)
      if (named[id].seen) {
        named[id].site.name = sites.names()[id];
        ranked.push_back(&named[id]);
      }
    // Equal figures in the order of their names.
    std::sort(ranked.begin(), ranked.end(), [&](const Named* a, const Named* b) {
      const auto wa = by_count ? static_cast<int64_t>(a->site.count) : a->site.bytes;
      const auto wb = by_count ? static_cast<int64_t>(b->site.count) : b->site.bytes;
      return wa != wb ? wa > wb : a->site.name < b->site.name;
    });
    if (ranked.size() > limit) ranked.resize(limit);
    std::vector<HeapSite> out;
    for (Named* n : ranked) {
      n->site.call_path = sites.path(sites.proc_of(n->best_site), sites.stack_of(n->best_site));
      out.push_back(std::move(n->site));
    }
    return out;
  }

 private:
  struct Entry {
    int64_t bytes = 0;
    uint64_t count = 0;
    bool used = false;
  };
  std::vector<Entry> by_site_;
  std::vector<uint32_t> touched_;  // the sites added to, in that order
};

std::string bytes_text(int64_t b) {
  char buf[64];
  const double v = static_cast<double>(b);
  if (std::abs(v) >= 1 << 30)
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1 << 30));
  else if (std::abs(v) >= 1 << 20)
    std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1 << 20));
  else if (std::abs(v) >= 1 << 10)
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / (1 << 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

std::string count_text(uint64_t n) { return std::to_string(n); }

// Sampled mode: the half-width of the 95% interval of an estimated total of T bytes (1.96 standard errors).
// Each sampled block of s bytes weighs w = s / p (p = 1 - exp(-s/R), R the rate) and adds w * (w - s) <= w *
// R to the estimator's variance, so sqrt(T * R) bounds the standard error (near equality when blocks are much
// smaller than R): +-12.7% of a 121 MiB peak at the default 512 KiB. The cross-fitted peak (heap/source.cpp)
// averages two half-sample readings of variance ~2 T R each: ~T R again.
// T + R rather than T: a total far below the rate is most often estimated 0 (no sample), and its interval
// must still reach up to what one sample would have said (~R).
int64_t sampling_error(int64_t total, double rate) {
  return static_cast<int64_t>(1.96 *
                              std::sqrt((static_cast<double>(std::max<int64_t>(total, 0)) + rate) * rate));
}

// Sampled mode: the 95% interval of the peak M, held by `samples` samples. With 64 or more, M is cross-fitted
// (unbiased) and its interval the usual M +- 1.96 s, s = sqrt((M + R) R). With fewer, M is the highest point
// of the estimated curve, so the highest of its noise as well (heap_prog estimate: +17% on a plateau):
//  - above: the estimate at the true peak's time is at most M, and at least T - 1.96 s(T) in 97.5% of runs,
//    so T <= M + 1.96 s(T), solved for T;
//  - below: M exceeds the truth by the largest of the curve's errors, and the largest of K independent
//    normal readings stays under 4 standard errors in 97.5% of runs up to K ~ 700 (a plateau turned over
//    hundreds of times), so T >= M - 4 s.
// Wide on purpose: heap_prog estimate at one sample per 120 KB (~45 samples at the peak) has M 40% above the
// truth on average; M +- 1.96 s covered the truth in 8 of 20 seeded runs, this interval (M -62%, +35%) in 20.
std::pair<int64_t, int64_t> peak_interval(int64_t peak, double rate, uint64_t samples) {
  const double m = static_cast<double>(std::max<int64_t>(peak, 0));
  const double s = std::sqrt((m + rate) * rate);
  if (samples >= 64) return {std::llround(m - 1.96 * s), std::llround(m + 1.96 * s)};
  // x = T + R: x - 1.96 sqrt(R x) - (M + R) = 0, a quadratic in sqrt(x).
  const double root = (1.96 * std::sqrt(rate) + std::sqrt(1.96 * 1.96 * rate + 4 * (m + rate))) / 2;
  return {std::llround(std::max(0.0, m - 4 * s)), std::llround(root * root - rate)};
}

// "12.0 MiB" in full mode, "12.0 MiB +- 0.80 MiB" in sampled mode.
std::string estimate_text(const HeapReport& r, int64_t bytes) {
  if (!r.sampled) return bytes_text(bytes);
  return bytes_text(bytes) + " +- " + bytes_text(sampling_error(bytes, r.rate_bytes));
}

// The peak: as estimate_text(), or below 64 samples "~4.00 MiB (95% interval 1.10 MiB to 5.60 MiB: 30
// samples held it)".
std::string peak_text(const HeapReport& r) {
  if (!r.sampled || r.peak_samples >= 64) return estimate_text(r, r.peak_bytes);
  return "~" + bytes_text(r.peak_bytes) + " (95% interval " + bytes_text(r.peak_low) + " to " +
         bytes_text(r.peak_high) + ": only " + std::to_string(r.peak_samples) + " samples held it)";
}

// "1234" in full mode, "1234 +- 56" in sampled mode (the 95% interval of the estimated count).
std::string temporary_text(const HeapReport& r) {
  if (!r.sampled) return count_text(r.temporary);
  return "~" + count_text(r.temporary) + " +- " +
         count_text(static_cast<uint64_t>(std::llround(1.96 * static_cast<double>(r.temporary_error))));
}

}  // namespace

std::string heap_bytes_text(int64_t bytes) { return bytes_text(bytes); }
int64_t heap_sampling_error(int64_t total, double rate) { return sampling_error(total, rate); }

bool has_heap_data(const model::Profile& profile) {
  for (const model::Process& proc : profile.processes)
    for (const model::Thread& t : proc.threads)
      if (!t.allocations.empty()) return true;
  return profile.meta.heap.has_value();
}

HeapReport make_heap_report(const model::Profile& p, size_t limit) {
  HeapReport r;
  SiteFinder sites(p);
  SiteTally leaks, allocs, peak;
  std::vector<std::pair<uint64_t, int64_t>> timeline;  // (time, bytes): the peak when meta has none
  for (size_t pi = 0; pi < p.processes.size(); ++pi) {
    size_t rows = 0;
    for (const model::Thread& t : p.processes[pi].threads) rows += t.allocations.size();
    sites.expect(pi, rows);
    for (const model::Thread& t : p.processes[pi].threads) {
      std::vector<uint64_t> freed;  // sorted: a hash set's node per free row cost more than the sort
      for (const model::Allocation& a : t.allocations)
        if (a.bytes < 0) freed.push_back(a.address);
      std::sort(freed.begin(), freed.end());
      for (const model::Allocation& a : t.allocations) {
        if (!p.meta.heap) timeline.push_back({a.time_ns, a.bytes});
        if (a.bytes < 0) {
          r.frees += a.count;
          continue;
        }
        const uint32_t site = sites.site(pi, a.stack);
        r.allocations += a.count;
        r.bytes_allocated += a.bytes;
        allocs.add(site, a.bytes, a.count);
        if (!std::binary_search(freed.begin(), freed.end(), a.address)) {
          r.leaked_bytes += a.bytes;
          r.leaked_blocks += a.count;
          leaks.add(site, a.bytes, a.count);
        }
        if (a.at_peak) {
          peak.add(site, a.bytes, a.count);
          r.peak_samples += a.count;  // sampled: a row's count is its samples
        }
      }
    }
  }
  const uint64_t start = p.meta.start_monotonic_ns;
  if (const auto& h = p.meta.heap) {
    r.sampled = h->sampled;
    r.rate_bytes = h->rate_bytes;
    r.temporary = h->temporary;
    r.temporary_error = h->temporary_error;
    r.peak_bytes = h->peak_bytes;
    r.peak_time_ms = h->peak_time_ns > start ? static_cast<double>(h->peak_time_ns - start) / 1e6 : 0;
    r.sizes = h->sizes;
  } else {
    std::stable_sort(timeline.begin(), timeline.end(), [](auto& a, auto& b) { return a.first < b.first; });
    int64_t total = 0;
    for (auto [time, bytes] : timeline) {
      total += bytes;
      if (total > r.peak_bytes) {
        r.peak_bytes = total;
        r.peak_time_ms = time > start ? static_cast<double>(time - start) / 1e6 : 0;
      }
    }
  }
  if (r.sampled)
    std::tie(r.peak_low, r.peak_high) = peak_interval(r.peak_bytes, r.rate_bytes, r.peak_samples);
  r.top_leak_sites = leaks.top(sites, limit, false);
  r.top_alloc_sites = allocs.top(sites, limit, false);
  r.top_count_sites = allocs.top(sites, limit, true);
  r.peak_sites = peak.top(sites, limit, false);
  return r;
}

std::string format_heap_summary(const HeapReport& r, size_t n) {
  std::string out;
  char line[512];
  const char* est = r.sampled ? " (estimated from samples, +- their 95% interval)" : "";
  std::string peak = peak_text(r);
  if (!r.sampled) peak += " (" + std::to_string(r.peak_bytes) + " bytes)";  // exact: worth all digits
  std::snprintf(line, sizeof line,
                "fxprof: heap%s: peak %s at %.3f s; %s in %llu blocks still allocated at exit\n", est,
                peak.c_str(), r.peak_time_ms / 1e3, estimate_text(r, r.leaked_bytes).c_str(),
                static_cast<unsigned long long>(r.leaked_blocks));
  out += line;
  if (!r.sampled)
    std::snprintf(line, sizeof line, "fxprof: heap: %llu allocations (%s), %llu temporary, %llu frees\n",
                  static_cast<unsigned long long>(r.allocations), bytes_text(r.bytes_allocated).c_str(),
                  static_cast<unsigned long long>(r.temporary), static_cast<unsigned long long>(r.frees));
  else
    std::snprintf(line, sizeof line,
                  "fxprof: heap: %s allocated, %s temporary allocations, %llu sampled allocations, %llu "
                  "sampled frees\n",
                  estimate_text(r, r.bytes_allocated).c_str(), temporary_text(r).c_str(),
                  static_cast<unsigned long long>(r.allocations), static_cast<unsigned long long>(r.frees));
  out += line;
  for (size_t i = 0; i < r.top_leak_sites.size() && i < n; ++i) {
    const HeapSite& s = r.top_leak_sites[i];
    std::snprintf(line, sizeof line, "fxprof: heap:   %s in %llu blocks: %s\n", bytes_text(s.bytes).c_str(),
                  static_cast<unsigned long long>(s.count), s.name.c_str());
    out += line;
  }
  return out;
}

namespace {

// The totals: allocations, frees, temporary, peak, leaked.
void format_heap_totals(const HeapReport& r, std::string& out) {
  char line[1024];
  if (r.sampled)
    std::snprintf(
        line, sizeof line,
        "Heap (sampled: one sample per %.0f bytes on average; bytes are unbiased estimates +- their 95%% "
        "interval, counts are samples)\n",
        r.rate_bytes);
  else
    std::snprintf(line, sizeof line, "Heap (full: every allocation and free)\n");
  out += line;
  std::snprintf(line, sizeof line, "  allocations:      %s (%s)\n", count_text(r.allocations).c_str(),
                estimate_text(r, r.bytes_allocated).c_str());
  out += line;
  std::snprintf(line, sizeof line, "  frees:            %s\n", count_text(r.frees).c_str());
  out += line;
  if (!r.sampled)
    std::snprintf(
        line, sizeof line,
        "  temporary:        %s (%.1f%% of allocations: freed before the thread allocated or freed anything "
        "else)\n",
        count_text(r.temporary).c_str(),
        r.allocations ? 100.0 * static_cast<double>(r.temporary) / static_cast<double>(r.allocations) : 0.0);
  else
    std::snprintf(
        line, sizeof line,
        "  temporary:        %s blocks (estimated: freed before the thread allocated or freed anything "
        "else)\n",
        temporary_text(r).c_str());
  out += line;
  if (r.sampled)
    std::snprintf(line, sizeof line, "  peak:             %s at %.3f s\n", peak_text(r).c_str(),
                  r.peak_time_ms / 1e3);
  else
    std::snprintf(line, sizeof line, "  peak:             %s (%lld bytes) at %.3f s\n",
                  bytes_text(r.peak_bytes).c_str(), static_cast<long long>(r.peak_bytes),
                  r.peak_time_ms / 1e3);
  out += line;
  std::snprintf(line, sizeof line, "  leaked:           %s in %s blocks (still allocated at exit)\n",
                estimate_text(r, r.leaked_bytes).c_str(), count_text(r.leaked_blocks).c_str());
  out += line;
  if (r.suppressed_functions.empty()) return;
  std::string names;
  for (const std::string& f : r.suppressed_functions) names += (names.empty() ? "" : ", ") + f;
  std::snprintf(
      line, sizeof line,
      "  suppressed:       %s %s (%s) whose stack contains %s: left out above and below (the peak's "
      "bytes, temporaries and sizes count every block)\n",
      count_text(r.suppressed_allocations).c_str(), r.sampled ? "sampled allocations" : "allocations",
      bytes_text(r.suppressed_bytes).c_str(), names.c_str());
  out += line;
}

// A list of sites under its title, each with up to 6 callers.
void format_sites(const char* title, const std::vector<HeapSite>& sites, std::string& out) {
  char line[1024];
  out += "\n";
  out += title;
  out += "\n";
  if (sites.empty()) out += "  (none)\n";
  for (const HeapSite& s : sites) {
    std::snprintf(line, sizeof line, "  %10s in %10s blocks: %s\n", bytes_text(s.bytes).c_str(),
                  count_text(s.count).c_str(), s.name.c_str());
    out += line;
    for (size_t i = 1; i < s.call_path.size() && i <= 6; ++i) out += "        from " + s.call_path[i] + "\n";
  }
}

// The histogram of block sizes.
void format_sizes(const HeapReport& r, std::string& out) {
  if (r.sizes.empty()) return;
  char line[1024];
  out += "\nSizes:\n";
  uint64_t most = 0, all = 0;
  for (const auto& b : r.sizes) {
    most = std::max(most, b.count);
    all += b.count;
  }
  uint64_t lo = 0;
  for (const auto& b : r.sizes) {
    std::string range = b.max_size == 1
                            ? "0-1 B"
                            : std::to_string(lo + 1) + "-" + bytes_text(static_cast<int64_t>(b.max_size));
    if (b.max_size == UINT64_MAX) range = "> 8 EiB";
    const int bar =
        most ? static_cast<int>(40.0 * static_cast<double>(b.count) / static_cast<double>(most) + 0.5) : 0;
    std::snprintf(line, sizeof line, "  %-16s %10s blocks %5.1f%%  %s\n", range.c_str(),
                  count_text(b.count).c_str(),
                  all ? 100.0 * static_cast<double>(b.count) / static_cast<double>(all) : 0.0,
                  std::string(static_cast<size_t>(bar), '#').c_str());
    out += line;
    lo = b.max_size;
  }
}

}  // namespace

std::string format_heap_report(const HeapReport& r) {
  std::string out;
  format_heap_totals(r, out);
  format_sites("Held at the peak:", r.peak_sites, out);
  format_sites("Leaked (still allocated at exit):", r.top_leak_sites, out);
  format_sites("Most bytes allocated:", r.top_alloc_sites, out);
  format_sites("Most allocations:", r.top_count_sites, out);
  format_sizes(r, out);
  return out;
}

void write_heap_report_json(const HeapReport& r, JsonWriter& w) {
  auto sites = [&](std::string_view key, const std::vector<HeapSite>& list) {
    w.key(key).begin_array();
    for (const HeapSite& s : list) {
      w.begin_object().key("name").value(s.name).key("bytes").value(s.bytes).key("count").value(s.count);
      w.key("callPath").begin_array();
      for (const std::string& f : s.call_path) w.value(f);
      w.end_array().end_object();
    }
    w.end_array();
  };
  w.begin_object();
  w.key("mode").value(r.sampled ? "sampled" : "full");
  if (r.sampled) {  // the 95% interval's half-width of each estimated total (sampling_error)
    w.key("rateBytes").value(r.rate_bytes);
    w.key("peakBytesError").value(sampling_error(r.peak_bytes, r.rate_bytes));
    w.key("peakBytesLow").value(r.peak_low).key("peakBytesHigh").value(r.peak_high);
    w.key("peakSamples").value(r.peak_samples);
    w.key("leakedBytesError").value(sampling_error(r.leaked_bytes, r.rate_bytes));
    w.key("bytesAllocatedError").value(sampling_error(r.bytes_allocated, r.rate_bytes));
    w.key("temporaryError")
        .value(static_cast<uint64_t>(std::llround(1.96 * static_cast<double>(r.temporary_error))));
  }
  w.key("allocations").value(r.allocations).key("bytesAllocated").value(r.bytes_allocated);
  w.key("frees").value(r.frees);
  w.key("peakBytes").value(r.peak_bytes).key("peakTimeMs").value(r.peak_time_ms);
  w.key("leakedBytes").value(r.leaked_bytes).key("leakedBlocks").value(r.leaked_blocks);
  w.key("temporary").value(r.temporary);
  if (!r.suppressed_functions.empty()) {
    w.key("suppressedAllocations")
        .value(r.suppressed_allocations)
        .key("suppressedBytes")
        .value(r.suppressed_bytes);
    w.key("suppress").begin_array();
    for (const std::string& f : r.suppressed_functions) w.value(f);
    w.end_array();
  }
  sites("topLeakSites", r.top_leak_sites);
  sites("topAllocSites", r.top_alloc_sites);
  sites("topCountSites", r.top_count_sites);
  sites("peakSites", r.peak_sites);
  w.key("sizes").begin_array();
  for (const auto& b : r.sizes)
    w.begin_object()
        .key("maxSize")
        .value(b.max_size)
        .key("count")
        .value(b.count)
        .key("bytes")
        .value(b.bytes)
        .end_object();
  w.end_array();
  w.end_object();
}

}  // namespace fxprof::sinks
