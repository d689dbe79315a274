// fxprof gecko, the Gecko reader: a thread's markers table, and the allocations its `Native allocation`
// markers stand for (read into the thread's allocations as they come).
#include <algorithm>
#include <cmath>
#include <string>

#include "gecko/gecko_reader_internal.h"
#include "model/markers.h"

namespace fxprof::gecko::internal {

struct Reader::MarkerRow {
  Reader& r;
  model::Thread& t;
  ThreadTables& tt;
  int64_t cn, cs, ce, cp, cc, cd;
  model::Marker m;
  int64_t name = -1;
  double start = NAN, end_ms = NAN;
  void begin() {
    m = {};
    name = -1;
    start = end_ms = NAN;
  }
  bool cell(size_t i, od::value c) {
    const auto ii = static_cast<int64_t>(i);
    if (ii == cn) return r.integer(c, name);
    if (ii == cs) return r.number(c, start);
    if (ii == ce) return r.number(c, end_ms);
    if (ii == cp) {
      int64_t ph = 0;
      if (!r.integer(c, ph, 0)) return false;
      m.phase = static_cast<model::MarkerPhase>(ph >= 0 && ph <= 3 ? ph : 0);
      return true;
    }
    if (ii == cc) {
      int64_t cat = 0;
      if (!r.integer(c, cat, 0)) return false;
      m.category = static_cast<model::Category>(cat >= 0 && cat < 256 ? cat : 0);
      return true;
    }
    if (ii == cd) return r.payload(c, m);
    return true;
  }
  bool end() {
    // IntervalEnd markers carry their time in the end column; the model keeps it in start_ns.
    if (m.phase == model::MarkerPhase::IntervalEnd) {
      m.start_ns = rel(end_ms);
    } else {
      m.start_ns = rel(start);
      m.end_ns = std::isnan(end_ms) ? 0 : rel(end_ms);
    }
    // A `Native allocation` marker goes straight into the thread's allocations (what the writer made them
    // from): a --heap=full profile holds hundreds of thousands, and keeping each as a marker first (its
    // fields on the heap) was 200 bytes a row at the reader's peak.
    if (m.type != model::kNoString && r.p_.strings.get(m.type) == "Native allocation") {
      t.allocations.push_back(allocation_of(m));
      return true;
    }
    tt.marker_names.push_back(name);
    t.markers.push_back(std::move(m));
    return true;
  }
  model::Allocation allocation_of(const model::Marker& m) const;
};

// Streamed in batches of rows: a --heap=full profile's allocations are markers, most of its text.
bool Reader::markers(model::Thread& t, ThreadTables& tt) {
  return table(tt.markers_schema, [&] {
    const Schema& s = tt.markers_schema;
    MarkerRow row{*this,
                  t,
                  tt,
                  s.at("name"),
                  s.at("startTime"),
                  s.at("endTime"),
                  s.at("phase"),
                  s.at("category"),
                  s.at("data"),
                  {}};
    return batched_rows(row, [&](size_t n) {
      if (t.markers.capacity() < t.markers.size() + n)
        t.markers.reserve(std::max(t.markers.size() + n, t.markers.capacity() * 2));
    });
  });
}

bool Reader::payload(od::value v, model::Marker& m) {
  return fields(v, [&](std::string_view k, od::value f) {
    od::json_type ty;
    if (auto e = f.type().get(ty)) return set(e);
    if (k == "type") {
      std::string s;
      if (!string(f, s)) return false;
      m.type = p_.strings.intern(s);
      return true;
    }
    if (k == "stack" && ty == od::json_type::object) {  // {samples: {schema: {stack}, data: [[stack, ...]]}}
      return fields(f, [&](std::string_view sk, od::value sv) {
        if (sk != "samples") return true;
        Schema sch;
        return fields(sv, [&](std::string_view k2, od::value v2) {
          if (k2 == "schema") return schema(v2, sch);
          if (k2 != "data") return true;
          const int64_t col = sch.at("stack");
          return elements(v2, [&](od::value row) {
            int64_t i = 0;
            return elements(row, [&](od::value cell) {
              if (i++ != col || m.stack != model::kNoStack) return true;
              int64_t st = -1;
              if (!integer(cell, st)) return false;
              if (st >= 0 && st < UINT32_MAX)
                m.stack = static_cast<model::StackId>(st);  // local until finish
              return true;
            });
          });
        });
      });
    }
    if (k == model::kProgramMarkerKey) {
      m.program = true;
      return true;
    }
    model::MarkerField mf;
    mf.key = p_.strings.intern(k);
    if (ty == od::json_type::string) {
      std::string s;
      if (!string(f, s)) return false;
      mf.is_string = true;
      mf.string = p_.strings.intern(s);
    } else if (ty == od::json_type::number) {
      if (auto e = f.get_double().get(mf.number)) return set(e);
    } else {
      return true;  // nested values (backtraces...) are not in the model
    }
    m.fields.push_back(mf);
    return true;
  });
}

// A `Native allocation` marker as the allocation it was written from; its stack is the thread's local index
// until finish_thread.
model::Allocation Reader::MarkerRow::allocation_of(const model::Marker& m) const {
  model::Allocation a{m.start_ns, m.stack, 0, 0, t.tid};
  for (const model::MarkerField& f : m.fields) {
    if (f.is_string) continue;
    const std::string_view key = r.p_.strings.get(f.key);
    if (key == "size") a.bytes = static_cast<int64_t>(std::llround(f.number));
    if (key == "memoryAddress") a.address = static_cast<uint64_t>(std::llround(f.number));
    if (key == "threadId") a.tid = static_cast<uint32_t>(std::llround(f.number));
    if (key == "count") a.count = static_cast<uint32_t>(std::llround(f.number));
    if (key == "atPeak") a.at_peak = f.number != 0;
  }
  return a;
}

}  // namespace fxprof::gecko::internal
