// fxprof gecko, the Gecko reader: a thread's samples table, streamed in batches of rows.
#include <algorithm>
#include <cmath>

#include "gecko/gecko_reader_internal.h"

namespace fxprof::gecko::internal {

struct Reader::SampleRow {
  Reader& r;
  model::Thread& t;
  int64_t cs, ct, cc;
  model::Sample s;
  void begin() { s = {}; }
  bool cell(size_t i, od::value c) {
    const auto ii = static_cast<int64_t>(i);
    if (ii == cs) {
      int64_t st = -1;
      if (!r.integer(c, st)) return false;
      if (st < -1 || st >= UINT32_MAX) return r.bad("a sample's stack index is out of range");
      s.stack = st < 0 ? model::kNoStack : static_cast<model::StackId>(st);  // local until finish
    } else if (ii == ct) {
      double ms = 0;
      if (!r.number(c, ms, 0)) return false;
      s.time_ns = rel(ms);
    } else if (ii == cc) {
      double us = 0;
      if (!r.number(c, us)) return false;
      s.cpu_delta_ns =
          std::isnan(us) || us < 0
              ? -1
              : model::saturate_cpu_delta(us >= 1e12 ? model::kMaxCpuDeltaNs : std::llround(us * 1000));
    }
    return true;
  }
  bool end() {
    t.samples.push_back(s);
    return true;
  }
};

bool Reader::samples(model::Thread& t, ThreadTables& tt) {
  if (js_.peek() != '{') return skip();
  return members([&](std::string_view k) {
    if (k == "schema") return element([&](od::value v) { return schema(v, tt.samples_schema); });
    if (k != "data") return skip();
    return sample_rows(t, tt);
  });
}

// The rows of a samples table, kSampleBatch at a time: each batch is an array of its own for simdjson, so
// that a thread's samples are never held as text whole (they are most of its text).
bool Reader::sample_rows(model::Thread& t, ThreadTables& tt) {
  SampleRow row{*this,
                t,
                tt.samples_schema.at("stack"),
                tt.samples_schema.at("time"),
                tt.samples_schema.at("threadCPUDelta"),
                {}};
  if (row.cs < 0 || row.ct < 0) return bad("samples without a stack or time column");
  return batched_rows(row, [&](size_t n) {
    if (t.samples.capacity() < t.samples.size() + n)
      t.samples.reserve(std::max(t.samples.size() + n, t.samples.capacity() * 2));
  });
}

}  // namespace fxprof::gecko::internal
