// fxprof gecko, the Gecko reader: a process object's own members (meta, libs, counters) and placing
// its times once it has been read.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gecko/gecko.h"
#include "gecko/gecko_reader_internal.h"

namespace fxprof::gecko::internal {

// ---- document structure ----

void Reader::start_process() {
  p_.processes.emplace_back();
  cur_ = p_.processes.size() - 1;
  proc_state_.emplace_back();
}

void Reader::finish_process(size_t index, bool top) {
  model::Process& proc = p_.processes[index];
  ProcState& st = proc_state_[index];
  // Without our monotonic stamp, place the process by its startTime against the top level's.
  uint64_t start = st.has_mono ? st.mono_ns
                               : to_ns(static_cast<double>(p_.meta.start_monotonic_ns) +
                                       rel_to_ns(st.start_unix_ms - p_.meta.start_unix_ms));
  proc.start_ns = start;
  if (!std::isnan(st.shutdown_ms)) proc.end_ns = shift(start, st.shutdown_ms);
  if (top && !std::isnan(st.profiling_end_ms)) p_.meta.end_monotonic_ns = shift(start, st.profiling_end_ms);
  if (top && p_.meta.heap && !std::isnan(st.heap_peak_ms))
    p_.meta.heap->peak_time_ns = shift(start, st.heap_peak_ms);
  // Times were read relative to the process start (meta may come after threads): make them absolute.
  for (model::Thread& t : proc.threads) {
    t.start_ns += start;
    if (t.end_ns) *t.end_ns += start;
    for (model::Sample& s : t.samples) s.time_ns += start;
    for (model::Marker& m : t.markers) {
      m.start_ns += start;
      m.end_ns += start;
    }
    for (model::Allocation& a : t.allocations) a.time_ns += start;
  }
  for (model::Counter& c : proc.counters)
    for (model::CounterSample& cs : c.samples) cs.time_ns += start;
  if (proc.name.empty() && !proc.threads.empty()) proc.name = proc.threads[0].name;
}

bool Reader::read_meta(od::value v, bool top) {
  if (top) saw_meta_ = true;
  ProcState& st = proc_state_[cur_];
  bool ok = fields(v, [&](std::string_view k, od::value f) {
    if (k == "preprocessedProfileVersion") {
      info_.processed = true;
      return true;
    }
    if (k == "startTime") {
      st.has_start = true;
      return number(f, st.start_unix_ms, 0);
    }
    if (k == "startTimeAsClockMonotonicNanosecondsSinceBoot") {
      st.has_mono = true;
      return u64(f, st.mono_ns);
    }
    if (k == "shutdownTime") return number(f, st.shutdown_ms);
    // The model has one category list; a child's may be the longer one (its frames index into it).
    if (k == "categories" && !top) {
      std::vector<model::CategoryInfo> cats;
      bool ok = read_categories(f, cats);
      if (ok && cats.size() > p_.meta.categories.size()) p_.meta.categories = std::move(cats);
      return ok;
    }
    if (!top) return true;
    if (k == "profilingEndTime") return number(f, st.profiling_end_ms);
    if (k == "interval") return number(f, p_.meta.interval_ms, 1.0);
    if (k == "product") return string(f, p_.meta.product);
    if (k == "oscpu") return string(f, p_.meta.oscpu);
    if (k == "CPUName") return string(f, p_.meta.machine.cpu_name);
    if (k == "physicalCPUs" || k == "logicalCPUs") {
      uint64_t n = 0;
      if (!u64(f, n)) return false;
      (k == "physicalCPUs" ? p_.meta.machine.physical_cpus : p_.meta.machine.logical_cpus) =
          static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
      return true;
    }
    if (k == "mainMemory") return u64(f, p_.meta.machine.main_memory);
    if (k == "arguments") return string(f, p_.meta.machine.command_line);
    if (k == "extra") return read_meta_extra(f);
    if (k == "fxprofHeap") return read_meta_heap(f, st);
    if (k == "fxprofSelectedThread") {
      uint64_t t = 0;
      if (!u64(f, t)) return false;
      p_.meta.selected_thread = t;
      return true;
    }
    if (k == "presymbolicated") {
      bool b = false;
      if (f.get_bool().get(b)) b = false;
      p_.meta.presymbolicated = b;
      return true;
    }
    if (k == "categories") {
      p_.meta.categories.clear();
      return read_categories(f, p_.meta.categories);
    }
    if (k == "markerSchema") return read_marker_schemas(f);
    return true;
  });
  if (top) {  // children are placed against the top level's start, so set it now
    p_.meta.start_unix_ms = st.start_unix_ms;
    p_.meta.start_monotonic_ns = st.has_mono ? st.mono_ns : 0;
  }
  return ok;
}

bool Reader::read_categories(od::value v, std::vector<model::CategoryInfo>& out) {
  return elements(v, [&](od::value c) {
    model::CategoryInfo ci;
    bool ok = fields(c, [&](std::string_view ck, od::value cv) {
      if (ck == "name") return string(cv, ci.name);
      if (ck == "color") return string(cv, ci.color);
      return true;
    });
    out.push_back(std::move(ci));
    return ok;
  });
}

// fxprof's "Stack walking" and "Data quality" sections (others are skipped).
bool Reader::read_meta_extra(od::value v) {
  return elements(v, [&](od::value section) {
    std::string label;
    model::Meta::StackWalk sw;
    std::vector<model::Meta::Problem> quality;
    bool ok = fields(section, [&](std::string_view sk, od::value sv) {
      if (sk == "label") return string(sv, label);
      if (sk != "entries") return true;
      return elements(sv, [&](od::value e) {
        std::string el;
        uint64_t v = 0;
        bool eok = fields(e, [&](std::string_view ek, od::value ev) {
          if (ek == "label") return string(ev, el);
          if (ek == "value") return u64(ev, v);
          return true;
        });
        if (el == "Stacks unwound (DWARF)") sw.stacks = v;
        if (el == "Ended at the end of the stack copy") sw.truncated = v;
        if (el == "Failed (no unwind information)") sw.failed = v;
        if (el == kStackWalkFramePointer) sw.frame_pointer = v;
        if (el == kStackWalkScanned) sw.scanned = v;
        const auto kind = model::Meta::problem_kind(el);
        quality.push_back({std::move(el), v, kind});
        return eok;
      });
    });
    if (label == "Stack walking") p_.meta.stack_walk = sw;
    if (label == kDataQuality) p_.meta.data_quality = std::move(quality);
    return ok;
  });
}

bool Reader::read_meta_heap(od::value v, ProcState& st) {
  model::Meta::HeapStats h;
  bool ok = fields(v, [&](std::string_view hk, od::value hv) {
    if (hk == "mode") {
      std::string mode;
      bool r = string(hv, mode);
      h.sampled = mode == "sampled";
      return r;
    }
    if (hk == "rate") return number(hv, h.rate_bytes, 0);
    if (hk == "temporary") return u64(hv, h.temporary);
    if (hk == "temporaryError") return u64(hv, h.temporary_error);
    if (hk == "peakBytes") {
      double b = 0;
      bool r = number(hv, b, 0);
      h.peak_bytes = static_cast<int64_t>(std::llround(b));
      return r;
    }
    if (hk == "peakTime") return number(hv, st.heap_peak_ms);
    if (hk != "sizes") return true;
    return elements(hv, [&](od::value bin) {
      model::Meta::HeapStats::SizeBin b;
      size_t i = 0;
      bool r = elements(bin, [&](od::value x) {
        uint64_t* dst[3] = {&b.max_size, &b.count, &b.bytes};
        return i < 3 ? u64(x, *dst[i++]) : true;
      });
      h.sizes.push_back(b);
      return r;
    });
  });
  p_.meta.heap = std::move(h);
  return ok;
}

bool Reader::read_marker_schemas(od::value v) {
  return elements(v, [&](od::value sv) {
    model::MarkerSchema s;
    bool ok = fields(sv, [&](std::string_view sk, od::value x) {
      if (sk == "name") return string(x, s.name);
      if (sk == "chartLabel") return string(x, s.chart_label);
      if (sk == "tooltipLabel") return string(x, s.tooltip_label);
      if (sk == "tableLabel") return string(x, s.table_label);
      if (sk == "display") {
        return elements(x, [&](od::value d) {
          std::string str;
          if (!string(d, str)) return false;
          s.display.push_back(std::move(str));
          return true;
        });
      }
      if (sk == "data") {
        return elements(x, [&](od::value d) {
          model::MarkerSchemaField mf;
          bool r = fields(d, [&](std::string_view dk, od::value dv) {
            if (dk == "key") return string(dv, mf.key);
            if (dk == "label") return string(dv, mf.label);
            if (dk == "format") return string(dv, mf.format);
            return true;
          });
          s.fields.push_back(std::move(mf));
          return r;
        });
      }
      return true;
    });
    p_.meta.marker_schemas.push_back(std::move(s));
    return ok;
  });
}

bool Reader::read_libs(od::value v) {
  model::Process& proc = p_.processes[cur_];
  return elements(v, [&](od::value lv) {
    model::Lib l;
    bool ok = fields(lv, [&](std::string_view k, od::value f) {
      if (k == "start") return u64(f, l.start);
      if (k == "end") return u64(f, l.end);
      if (k == "offset") return u64(f, l.offset);
      if (k == "name") return string(f, l.name);
      if (k == "path") return string(f, l.path);
      if (k == "debugName") return string(f, l.debug_name);
      if (k == "debugPath") return string(f, l.debug_path);
      if (k == "breakpadId") return string(f, l.breakpad_id);
      if (k == "codeId") return string(f, l.code_id);
      if (k == "arch") return string(f, l.arch);
      return true;
    });
    if (ok) proc.libs.push_back(std::move(l));
    return ok;
  });
}

// Counter tracks (gecko/gecko.cpp write_counters: `count` is the model's delta, `number` its count),
// their times relative to the process start until finish_process.
bool Reader::read_counters(od::value v) {
  return elements(v, [&](od::value cv) {
    model::Counter c;
    Schema sch;
    bool ok = fields(cv, [&](std::string_view k, od::value f) {
      if (k == "name") return string(f, c.name);
      if (k == "category") return string(f, c.category);
      if (k == "description") return string(f, c.description);
      if (k != "samples") return true;
      return fields(f, [&](std::string_view sk, od::value sv) {
        if (sk == "schema") return schema(sv, sch);
        if (sk != "data") return true;
        struct Row {
          Reader& r;
          model::Counter& c;
          int64_t ct, cc, cn;
          model::CounterSample s;
          void begin() { s = {}; }
          bool cell(size_t i, od::value cell) {
            const auto ii = static_cast<int64_t>(i);
            if (ii == ct) {
              double ms = 0;
              if (!r.number(cell, ms, 0)) return false;
              s.time_ns = rel(ms);
            } else if (ii == cc) {
              if (!cell.get_int64().get(s.delta)) return true;
              double d = 0;
              if (!r.number(cell, d, 0)) return false;
              if (!(d > -9.2e18 && d < 9.2e18)) return r.bad("a counter value out of range");
              s.delta = std::llround(d);
            } else if (ii == cn) {
              return r.u64(cell, s.count);
            }
            return true;
          }
          bool end() {
            c.samples.push_back(s);
            return true;
          }
        } row{*this, c, sch.at("time"), sch.at("count"), sch.at("number"), {}};
        if (row.ct < 0 || row.cc < 0) return bad("counter samples without a time or count column");
        return rows_counted(sv, row, [&](size_t n) { c.samples.reserve(c.samples.size() + n); });
      });
    });
    if (ok) p_.processes[cur_].counters.push_back(std::move(c));
    return ok;
  });
}

}  // namespace fxprof::gecko::internal
