#include "exporter/gecko_reader.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "base/fd.h"
#include "base/hex.h"
#include "exporter/gecko.h"

namespace fxprof::exporter {
namespace {

namespace od = simdjson::ondemand;
constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;

Result<ProfileText> inflate_capped(std::string_view in, const std::string& path) {
  const size_t limit = std::min(kMaxInflatedBytes, std::max<size_t>(in.size(), 4096) * kMaxInflateRatio);
  // gzip's trailer ends with the inflated size of the last member (mod 2^32): for the usual one-member file
  // that is the size exactly, so the text is mapped once, with no growing and no memory touched beyond it
  // (page faults are most of the cost of inflating here: the mapping is on huge pages when large). A wrong
  // hint (several members, 4 GiB or more, a lie) only means the mapping grows (mremap: no copy); the limit
  // applies either way. The extra 64 KiB is the free room the loop below keeps, so that the last inflate()
  // call does not grow the mapping; untouched, it costs address space only.
  size_t expected = in.size() * 10;
  if (in.size() >= 18) {
    const auto* t = reinterpret_cast<const unsigned char*>(in.data() + in.size() - 4);
    const size_t isize = size_t{t[0]} | size_t{t[1]} << 8 | size_t{t[2]} << 16 | size_t{t[3]} << 24;
    if (isize > 0) expected = isize + 65536;
  }
  auto mapped = map_anonymous(std::min<size_t>(expected, limit) + kPadding);
  if (!mapped) return Err(path + ": " + mapped.error());
  Mapping out = std::move(*mapped);
  size_t used = 0;
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return Err(path + ": cannot initialize zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  size_t remaining_in = in.size() - z.avail_in;
  std::string error;
  for (;;) {
    if (used > limit) {
      char buf[160];
      std::snprintf(
          buf, sizeof buf,
          "gzip data inflates beyond %zux its size or %zu GiB (the limit for profiles: a gzip bomb?)",
          kMaxInflateRatio, kMaxInflatedBytes >> 30);
      error = buf;
      break;
    }
    if (out.size() - used < 65536 + kPadding) {
      if (auto grown = grow_anonymous(out, out.size() * 2); !grown) {
        error = grown.error();
        break;
      }
    }
    const size_t room = out.size() - used - kPadding;
    z.next_out = static_cast<Bytef*>(out.data()) + used;
    z.avail_out = static_cast<uInt>(std::min<size_t>(room, UINT32_MAX));
    uInt before = z.avail_out;
    int rc = inflate(&z, Z_NO_FLUSH);
    used += before - z.avail_out;
    if (z.avail_in == 0 && remaining_in > 0) {
      size_t chunk = std::min<size_t>(remaining_in, UINT32_MAX);
      z.avail_in = static_cast<uInt>(chunk);
      remaining_in -= chunk;
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0 && remaining_in == 0) break;
      if (inflateReset(&z) != Z_OK) {  // another gzip member follows (cat a.gz b.gz is valid gzip)
        error = "corrupt gzip data";
        break;
      }
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {  // no progress possible: out of input (we always give output room)
      error = z.avail_in == 0 && remaining_in == 0 ? "truncated gzip data" : "corrupt gzip data";
      break;
    }
    error = std::string("corrupt gzip data") + (z.msg ? std::string(" (") + z.msg + ")" : "");
    break;
  }
  inflateEnd(&z);
  if (!error.empty()) return Err(path + ": " + error);
  return ProfileText(std::move(out), used);
}

bool starts_like_json_object(std::string_view bytes) {
  size_t i = 0;
  if (bytes.size() >= 3 && bytes.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // a UTF-8 byte order mark
  while (i < bytes.size() && (bytes[i] == ' ' || bytes[i] == '\n' || bytes[i] == '\r' || bytes[i] == '\t'))
    ++i;
  return i < bytes.size() && bytes[i] == '{';
}

// ---- the JSON reader ----

double rel_to_ns(double ms) { return std::round(ms * 1e6); }

struct LocalFrame {
  int64_t location = -1;
  int64_t line = 0;
  int64_t category = -1;
  int64_t file = -1;
  int64_t depth = 0;
  bool has_address = false;
  uint64_t address = 0;
};

struct Schema {
  std::unordered_map<std::string, int64_t> cols;
  int64_t at(const char* k) const {
    auto it = cols.find(k);
    return it == cols.end() ? -1 : it->second;
  }
};

class Reader {
 public:
  // `text` is followed by readable padding up to `capacity` bytes (at least kPadding).
  Reader(const std::string& name, std::string_view text, size_t capacity, ReadInfo& info)
      : name_(name), text_(text), capacity_(capacity), info_(info) {}

  Result<model::Profile> run() {
    // The parser sizes its index once, for this document (iterate() allocates only when its capacity is
    // short of the text: a fresh parser per profile allocates exactly once).
    od::parser parser;
    od::document doc;
    if (auto e = parser.iterate(simdjson::padded_string_view(text_.data(), text_.size(), capacity_)).get(doc))
      return fail(e);
    doc_ = &doc;
    od::object top;
    if (auto e = doc.get_object().get(top)) {
      if (e == simdjson::INCORRECT_TYPE)
        return Err(name_ + ": not a Firefox Profiler profile (not a JSON object)");
      return fail(e);
    }
    bool ok = read_root(top);
    if (!ok) return Err(err_);
    if (info_.processed) return model::Profile{};
    if (!saw_meta_) return Err(name_ + ": not a Firefox Profiler profile (no \"meta\" object)");
    if (!saw_threads_) return Err(name_ + ": not a Firefox Profiler profile (no \"threads\" array)");
    return std::move(p_);
  }

 private:
  Error fail(simdjson::error_code e) {
    if (e == simdjson::NUMBER_ERROR || e == simdjson::NUMBER_OUT_OF_RANGE) {
      return Err(name_ + ": a number beyond the range of a double" + where());
    }
    return Err(name_ + ": " + describe_json_error(text_, static_cast<int>(e)));
  }
  bool set(simdjson::error_code e) {
    if (err_.empty()) err_ = fail(e).message;
    return false;
  }
  bool bad(const std::string& what) {
    if (err_.empty()) err_ = name_ + ": not a Firefox Profiler profile (" + what + ")";
    return false;
  }
  std::string where() {
    if (!doc_) return {};
    const char* at = nullptr;
    if (doc_->current_location().get(at) || !at) return {};
    return " (near byte " + std::to_string(at - text_.data()) + ")";
  }

  // A number (int or double) or null (returns `null_value`).
  bool number(od::value v, double& out, double null_value = NAN) {
    od::json_type t;
    if (auto e = v.type().get(t)) return set(e);
    if (t == od::json_type::null) {
      out = null_value;
      return true;
    }
    if (auto e = v.get_double().get(out)) return set(e);
    return true;
  }
  bool integer(od::value v, int64_t& out, int64_t null_value = -1) {
    double d = 0;
    if (!number(v, d)) return false;
    if (std::isnan(d)) {
      out = null_value;
      return true;
    }
    if (d < -9.2e18 || d > 9.2e18) return bad("an index out of range");
    out = static_cast<int64_t>(d);
    return true;
  }
  bool u64(od::value v, uint64_t& out) {
    od::json_type t;
    if (auto e = v.type().get(t)) return set(e);
    if (t != od::json_type::number) {
      out = 0;
      return true;
    }
    if (!v.get_uint64().get(out)) return true;
    double d = 0;
    if (auto e = v.get_double().get(d)) return set(e);
    out = d > 0 && d < 1.8e19 ? static_cast<uint64_t>(d) : 0;
    return true;
  }
  bool string(od::value v, std::string& out) {
    od::json_type t;
    if (auto e = v.type().get(t)) return set(e);
    if (t != od::json_type::string) {
      out.clear();
      return true;
    }
    std::string_view s;
    if (auto e = v.get_string().get(s)) return set(e);
    out.assign(s);
    return true;
  }

  template <class F>
  bool fields(od::value v, F&& f) {
    od::object o;
    if (auto e = v.get_object().get(o)) return e == simdjson::INCORRECT_TYPE ? true : set(e);
    return fields(o, f);
  }
  template <class F>
  bool fields(od::object o, F&& f) {
    for (auto field : o) {
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return set(e);
      od::value val;
      if (auto e = field.value().get(val)) return set(e);
      if (!f(key, val)) return false;
    }
    return true;
  }
  template <class F>
  bool elements(od::value v, F&& f) {
    od::array a;
    if (auto e = v.get_array().get(a)) return e == simdjson::INCORRECT_TYPE ? true : set(e);
    for (auto el : a) {
      od::value val;
      if (auto e = el.get(val)) return set(e);
      if (!f(val)) return false;
    }
    return true;
  }
  bool schema(od::value v, Schema& s) {
    return fields(v, [&](std::string_view k, od::value c) {
      int64_t i = -1;
      if (!integer(c, i)) return false;
      if (i < 0 || i > 64) return bad("a schema column out of range");
      s.cols.emplace(std::string(k), i);
      return true;
    });
  }
  // Rows of a {schema, data} table: `row(cells)` gets the cells of each row in order.
  template <class F>
  bool rows(od::value v, const Schema& s, F&& row) {
    (void)s;
    return elements(v, [&](od::value r) {
      size_t i = 0;
      return row_cells(r, i, row);
    });
  }
  // The same for an array already open; `reserve(n)` first gets the row count (one pass over simdjson's
  // structural index, no parsing), so that a large table is allocated once instead of grown by doubling.
  template <class F, class R>
  bool rows_counted(od::value v, F&& row, R&& reserve) {
    od::array a;
    if (auto e = v.get_array().get(a)) return e == simdjson::INCORRECT_TYPE ? true : set(e);
    size_t n = 0;
    if (auto e = a.count_elements().get(n)) return set(e);
    reserve(n);
    for (auto el : a) {
      od::value r;
      if (auto e = el.get(r)) return set(e);
      size_t i = 0;
      if (!row_cells(r, i, row)) return false;
    }
    return true;
  }
  template <class F>
  bool row_cells(od::value r, size_t& i, F&& row) {
    od::array a;
    if (auto e = r.get_array().get(a))
      return e == simdjson::INCORRECT_TYPE ? bad("a table row is not an array") : set(e);
    row.begin();
    for (auto el : a) {
      od::value c;
      if (auto e = el.get(c)) return set(e);
      if (!row.cell(i++, c)) return false;
    }
    return row.end();
  }

  // ---- document structure ----

  bool read_root(od::object top) {
    start_process();
    bool ok = fields(top, [&](std::string_view k, od::value v) {
      if (info_.processed) return true;
      if (k == "profile" && !saw_meta_) {  // {profile: <gecko>} (old DevTools export): unwrap
        od::object inner;
        if (auto e = v.get_object().get(inner)) return e == simdjson::INCORRECT_TYPE ? true : set(e);
        return fields(inner, [&](std::string_view k2, od::value v2) {
          return info_.processed || process_field(k2, v2, true);
        });
      }
      return process_field(k, v, true);
    });
    if (ok && !info_.processed) finish_process(0, true);
    return ok;
  }

  bool read_process(od::object o) {
    const size_t me = cur_;
    bool ok = fields(
        o, [&](std::string_view k, od::value v) { return info_.processed || process_field(k, v, false); });
    if (ok && !info_.processed) finish_process(me, false);
    return ok;
  }

  // One process object (the top level or an entry of `processes`), field by field in document order.
  bool process_field(std::string_view k, od::value v, bool top) {
    if (k == "meta") return read_meta(v, top);
    if (k == "libs") return read_libs(v);
    if (k == "threads") {
      saw_threads_ |= top;
      return elements(v, [&](od::value t) { return read_thread(t); });
    }
    if (k == "processes" && top) {
      size_t parent = cur_;
      bool ok = elements(v, [&](od::value pv) {
        od::object po;
        if (auto e = pv.get_object().get(po)) return e == simdjson::INCORRECT_TYPE ? true : set(e);
        start_process();
        return read_process(po);
      });
      cur_ = parent;
      return ok;
    }
    return true;
  }

  void start_process() {
    p_.processes.emplace_back();
    cur_ = p_.processes.size() - 1;
    proc_state_.emplace_back();
  }
  struct ProcState {
    bool has_start = false;
    double start_unix_ms = 0;
    bool has_mono = false;
    uint64_t mono_ns = 0;
    double shutdown_ms = NAN;
    double profiling_end_ms = NAN;
  };

  void finish_process(size_t index, bool top) {
    model::Process& proc = p_.processes[index];
    ProcState& st = proc_state_[index];
    // Without our monotonic stamp, place the process by its startTime against the top level's.
    uint64_t start =
        st.has_mono
            ? st.mono_ns
            : static_cast<uint64_t>(std::max(0.0, static_cast<double>(p_.meta.start_monotonic_ns) +
                                                      rel_to_ns(st.start_unix_ms - p_.meta.start_unix_ms)));
    proc.start_ns = start;
    if (!std::isnan(st.shutdown_ms)) proc.end_ns = shift(start, st.shutdown_ms);
    if (top && !std::isnan(st.profiling_end_ms)) p_.meta.end_monotonic_ns = shift(start, st.profiling_end_ms);
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
    if (proc.name.empty() && !proc.threads.empty()) proc.name = proc.threads[0].name;
  }
  static uint64_t shift(uint64_t start, double ms) {
    double ns = static_cast<double>(start) + rel_to_ns(ms);
    return ns <= 0 ? 0 : static_cast<uint64_t>(ns);
  }
  // Relative ms -> ns offset stored until finish_process adds the start (negative clamps to 0).
  static uint64_t rel(double ms) {
    double ns = rel_to_ns(ms);
    return std::isnan(ns) || ns <= 0 ? 0 : static_cast<uint64_t>(ns);
  }

  bool read_meta(od::value v, bool top) {
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
        bool ok = elements(f, [&](od::value c) {
          model::CategoryInfo ci;
          bool r = fields(c, [&](std::string_view ck, od::value cv) {
            if (ck == "name") return string(cv, ci.name);
            if (ck == "color") return string(cv, ci.color);
            return true;
          });
          cats.push_back(std::move(ci));
          return r;
        });
        if (ok && cats.size() > p_.meta.categories.size()) p_.meta.categories = std::move(cats);
        return ok;
      }
      if (!top) return true;
      if (k == "profilingEndTime") return number(f, st.profiling_end_ms);
      if (k == "interval") return number(f, p_.meta.interval_ms, 1.0);
      if (k == "product") return string(f, p_.meta.product);
      if (k == "oscpu") return string(f, p_.meta.oscpu);
      if (k == "extra") {  // fxprof's "Stack walking" and "Data quality" sections (others are skipped)
        return elements(f, [&](od::value section) {
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
              quality.push_back({std::move(el), v});
              return eok;
            });
          });
          if (label == "Stack walking") p_.meta.stack_walk = sw;
          if (label == kDataQuality) p_.meta.data_quality = std::move(quality);
          return ok;
        });
      }
      if (k == "presymbolicated") {
        bool b = false;
        if (f.get_bool().get(b)) b = false;
        p_.meta.presymbolicated = b;
        return true;
      }
      if (k == "categories") {
        p_.meta.categories.clear();
        return elements(f, [&](od::value c) {
          model::CategoryInfo ci;
          bool ok = fields(c, [&](std::string_view ck, od::value cv) {
            if (ck == "name") return string(cv, ci.name);
            if (ck == "color") return string(cv, ci.color);
            return true;
          });
          p_.meta.categories.push_back(std::move(ci));
          return ok;
        });
      }
      if (k == "markerSchema") {
        return elements(f, [&](od::value sv) {
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
      return true;
    });
    if (top) {  // children are placed against the top level's start, so set it now
      p_.meta.start_unix_ms = st.start_unix_ms;
      p_.meta.start_monotonic_ns = st.has_mono ? st.mono_ns : 0;
    }
    return ok;
  }

  bool read_libs(od::value v) {
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

  // ---- threads ----

  struct ThreadTables {
    Schema samples_schema, markers_schema, stack_schema, frame_schema;
    std::vector<std::pair<int64_t, int64_t>> stacks;  // (prefix, frame), local
    std::vector<LocalFrame> frames;
    std::vector<std::string> strings;
    std::vector<int64_t> marker_names;  // local string index per marker
  };

  bool read_thread(od::value tv) {
    model::Process& proc = p_.processes[cur_];
    model::Thread t;
    ThreadTables tt;
    std::string process_name;
    bool has_pid = false;
    bool ok = fields(tv, [&](std::string_view k, od::value f) {
      if (k == "name") return string(f, t.name);
      if (k == "processName") return string(f, process_name);
      if (k == "pid") {
        has_pid = true;
        od::json_type ty;
        if (auto e = f.type().get(ty)) return set(e);
        if (ty == od::json_type::string) {  // "1234.1": a later process with a reused pid
          std::string s;
          if (!string(f, s)) return false;
          uint32_t pid = 0;
          std::from_chars(s.data(), s.data() + s.size(), pid);
          proc.pid = pid;
          return true;
        }
        uint64_t pid = 0;
        if (!u64(f, pid)) return false;
        proc.pid = static_cast<uint32_t>(pid);
        return true;
      }
      if (k == "tid") {
        uint64_t tid = 0;
        if (!u64(f, tid)) return false;
        t.tid = static_cast<uint32_t>(tid);
        return true;
      }
      if (k == "registerTime") {
        double ms = 0;
        if (!number(f, ms, 0)) return false;
        t.start_ns = rel(ms);
        return true;
      }
      if (k == "unregisterTime") {
        double ms = 0;
        if (!number(f, ms)) return false;
        if (!std::isnan(ms)) t.end_ns = rel(ms);
        return true;
      }
      if (k == "samples") return read_samples(f, t, tt);
      if (k == "markers") return read_markers(f, t, tt);
      if (k == "stackTable") return read_stacks(f, tt);
      if (k == "frameTable") return read_frames(f, tt);
      if (k == "stringTable") {
        return elements(f, [&](od::value s) {
          tt.strings.emplace_back();
          return string(s, tt.strings.back());
        });
      }
      return true;
    });
    if (!ok) return false;
    t.is_main = t.name == "GeckoMain";
    if (t.is_main) t.name = process_name;
    if (proc.name.empty()) proc.name = process_name;
    (void)has_pid;
    if (!finish_thread(proc, t, tt)) return false;
    proc.threads.push_back(std::move(t));
    return true;
  }

  bool read_samples(od::value v, model::Thread& t, ThreadTables& tt) {
    return fields(v, [&](std::string_view k, od::value f) {
      if (k == "schema") return schema(f, tt.samples_schema);
      if (k != "data") return true;
      const int64_t c_stack = tt.samples_schema.at("stack"), c_time = tt.samples_schema.at("time"),
                    c_cpu = tt.samples_schema.at("threadCPUDelta");
      if (c_stack < 0 || c_time < 0) return bad("samples without a stack or time column");
      struct Row {
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
      } row{*this, t, c_stack, c_time, c_cpu, {}};
      return rows_counted(f, row, [&](size_t n) { t.samples.reserve(t.samples.size() + n); });
    });
  }

  bool read_markers(od::value v, model::Thread& t, ThreadTables& tt) {
    return fields(v, [&](std::string_view k, od::value f) {
      if (k == "schema") return schema(f, tt.markers_schema);
      if (k != "data") return true;
      const Schema& s = tt.markers_schema;
      struct Row {
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
          tt.marker_names.push_back(name);
          t.markers.push_back(std::move(m));
          return true;
        }
      } row{*this,
            t,
            tt,
            s.at("name"),
            s.at("startTime"),
            s.at("endTime"),
            s.at("phase"),
            s.at("category"),
            s.at("data"),
            {}};
      return rows(f, s, row);
    });
  }

  bool payload(od::value v, model::Marker& m) {
    return fields(v, [&](std::string_view k, od::value f) {
      od::json_type ty;
      if (auto e = f.type().get(ty)) return set(e);
      if (k == "type") {
        std::string s;
        if (!string(f, s)) return false;
        m.type = p_.strings.intern(s);
        return true;
      }
      if (k == "stack" &&
          ty == od::json_type::object) {  // {samples: {schema: {stack}, data: [[stack, ...]]}}
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

  bool read_stacks(od::value v, ThreadTables& tt) {
    return fields(v, [&](std::string_view k, od::value f) {
      if (k == "schema") return schema(f, tt.stack_schema);
      if (k != "data") return true;
      const int64_t cp = tt.stack_schema.at("prefix"), cf = tt.stack_schema.at("frame");
      if (cp < 0 || cf < 0) return bad("a stackTable without prefix or frame columns");
      struct Row {
        Reader& r;
        ThreadTables& tt;
        int64_t cp, cf;
        int64_t prefix = -1, frame = -1;
        void begin() { prefix = frame = -1; }
        bool cell(size_t i, od::value c) {
          const auto ii = static_cast<int64_t>(i);
          if (ii == cp) return r.integer(c, prefix);
          if (ii == cf) return r.integer(c, frame);
          return true;
        }
        bool end() {
          tt.stacks.emplace_back(prefix, frame);
          return true;
        }
      } row{*this, tt, cp, cf};
      return rows(f, tt.stack_schema, row);
    });
  }

  bool read_frames(od::value v, ThreadTables& tt) {
    return fields(v, [&](std::string_view k, od::value f) {
      if (k == "schema") return schema(f, tt.frame_schema);
      if (k != "data") return true;
      const Schema& s = tt.frame_schema;
      if (s.at("location") < 0) return bad("a frameTable without a location column");
      struct Row {
        Reader& r;
        ThreadTables& tt;
        int64_t cl, cline, ccat, cfile, cdepth, caddr;
        LocalFrame fr;
        void begin() { fr = {}; }
        bool cell(size_t i, od::value c) {
          const auto ii = static_cast<int64_t>(i);
          if (ii == cl) return r.integer(c, fr.location);
          if (ii == cline) return r.integer(c, fr.line, 0);
          if (ii == ccat) return r.integer(c, fr.category, -1);
          if (ii == cfile) return r.integer(c, fr.file, -1);
          if (ii == cdepth) return r.integer(c, fr.depth, 0);
          if (ii == caddr) {
            od::json_type ty;
            if (auto e = c.type().get(ty)) return r.set(e);
            if (ty != od::json_type::number) return true;
            fr.has_address = true;
            return r.u64(c, fr.address);
          }
          return true;
        }
        bool end() {
          tt.frames.push_back(fr);
          return true;
        }
      } row{*this,
            tt,
            s.at("location"),
            s.at("line"),
            s.at("category"),
            s.at(kFileColumn),
            s.at(kInlineDepthColumn),
            s.at(kAddressColumn),
            {}};
      return rows(f, s, row);
    });
  }

  // The binary a process's lib named `name` belongs to (a new one if the process has no such lib).
  model::BinaryId binary_named(const model::Process& proc, std::string_view name) {
    for (const model::Lib& l : proc.libs)
      if (l.name == name || (l.name.empty() && l.debug_name == name)) return p_.intern_binary(l);
    model::Lib l;
    l.name = name;
    return p_.intern_binary(l);
  }

  // "0x..." (the prefix is what tells an unsymbolicated address from a name).
  static bool parse_address(std::string_view s, uint64_t& out) {
    return s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && parse_hex(s, out);
  }

  model::FrameId make_frame(const model::Process& proc, const ThreadTables& tt, const LocalFrame& lf) {
    std::string_view loc = tt.strings[static_cast<size_t>(lf.location)];
    model::Frame f;
    f.category = static_cast<model::Category>(lf.category >= 0 && lf.category < 256 ? lf.category : 0);
    uint64_t addr = 0;
    if (parse_address(loc, addr)) {
      f.kind = model::FrameKind::Native;
      f.address = addr;
      return p_.frames.intern(f);
    }
    // "name (in lib)": kernel frames, pre-symbolicated native ones, unresolved "0x<rel> (in lib)".
    if (loc.size() > 6 && loc.back() == ')') {
      size_t in = loc.rfind(" (in ");
      if (in != std::string_view::npos) {
        std::string_view fn = loc.substr(0, in), lib = loc.substr(in + 5, loc.size() - in - 6);
        if (lib == "[kernel.kallsyms]") {
          f.kind = model::FrameKind::Kernel;
          f.name = p_.strings.intern(fn);
          return p_.frames.intern(f);
        }
        f.kind = model::FrameKind::Native;
        f.binary = binary_named(proc, lib);
        if (parse_address(fn, addr)) {
          f.address = addr;
        } else {
          f.name = p_.strings.intern(fn);
          f.address = lf.has_address ? lf.address : 0;
          f.line = lf.line > 0 && lf.line < UINT32_MAX ? static_cast<uint32_t>(lf.line) : 0;
          if (lf.file >= 0 && static_cast<size_t>(lf.file) < tt.strings.size())
            f.file = p_.strings.intern(tt.strings[static_cast<size_t>(lf.file)]);
          f.inline_depth = static_cast<uint8_t>(std::clamp<int64_t>(lf.depth, 0, 255));
        }
        return p_.frames.intern(f);
      }
    }
    f.kind = model::FrameKind::Label;
    f.name = p_.strings.intern(loc);
    return p_.frames.intern(f);
  }

  bool finish_thread(const model::Process& proc, model::Thread& t, ThreadTables& tt) {
    std::vector<model::FrameId> frames;
    frames.reserve(tt.frames.size());
    for (const LocalFrame& lf : tt.frames) {
      if (lf.location < 0 || static_cast<size_t>(lf.location) >= tt.strings.size())
        return bad("a frame's location is not a string index");
      frames.push_back(make_frame(proc, tt, lf));
    }
    std::vector<model::StackId> stacks;
    stacks.reserve(tt.stacks.size());
    for (size_t i = 0; i < tt.stacks.size(); ++i) {
      auto [prefix, frame] = tt.stacks[i];
      // A forward prefix hangs the front end; refuse it rather than carry it on.
      if (prefix >= static_cast<int64_t>(i)) return bad("the stack table is not in topological order");
      if (frame < 0 || static_cast<size_t>(frame) >= frames.size())
        return bad("a stack's frame index is out of range");
      stacks.push_back(p_.stacks.intern(prefix < 0 ? model::kNoStack : stacks[static_cast<size_t>(prefix)],
                                        frames[static_cast<size_t>(frame)]));
    }
    for (model::Sample& s : t.samples) {
      if (s.stack == model::kNoStack) continue;
      if (s.stack >= stacks.size()) return bad("a sample's stack index is out of range");
      s.stack = stacks[s.stack];
    }
    for (size_t i = 0; i < t.markers.size(); ++i) {
      model::StackId& ms = t.markers[i].stack;
      if (ms != model::kNoStack) ms = ms < stacks.size() ? stacks[ms] : model::kNoStack;
      int64_t n = tt.marker_names[i];
      if (n >= 0 && static_cast<size_t>(n) < tt.strings.size())
        t.markers[i].name = p_.strings.intern(tt.strings[static_cast<size_t>(n)]);
    }
    take_allocations(t);
    return true;
  }

  // `Native allocation` markers back into the thread's allocations (what the writer made them from), so that
  // a profile read and written again keeps their compact form.
  void take_allocations(model::Thread& t) {
    auto is_allocation = [&](const model::Marker& m) {
      return m.type != model::kNoString && p_.strings.get(m.type) == "Native allocation";
    };
    if (std::none_of(t.markers.begin(), t.markers.end(), is_allocation)) return;
    auto kept = t.markers.begin();
    for (auto it = t.markers.begin(); it != t.markers.end(); ++it) {
      if (is_allocation(*it)) {
        model::Allocation a{it->start_ns, it->stack, 0, 0, t.tid};
        for (const model::MarkerField& f : it->fields) {
          if (f.is_string) continue;
          const std::string_view key = p_.strings.get(f.key);
          if (key == "size") a.bytes = static_cast<int64_t>(std::llround(f.number));
          if (key == "memoryAddress") a.address = static_cast<uint64_t>(std::llround(f.number));
          if (key == "threadId") a.tid = static_cast<uint32_t>(std::llround(f.number));
        }
        t.allocations.push_back(a);
        continue;
      }
      if (kept != it) *kept = std::move(*it);
      ++kept;
    }
    t.markers.erase(kept, t.markers.end());
  }

  const std::string& name_;
  std::string_view text_;
  size_t capacity_;
  ReadInfo& info_;
  od::document* doc_ = nullptr;
  model::Profile p_;
  std::vector<ProcState> proc_state_;
  size_t cur_ = SIZE_MAX;
  bool saw_meta_ = false, saw_threads_ = false;
  std::string err_;
};

}  // namespace

std::string describe_json_error(std::string_view text, int simdjson_error) {
  auto e = static_cast<simdjson::error_code>(simdjson_error);
  if (e == simdjson::EMPTY) return "empty file";
  // simdjson reports a cut-off document as a structure error; an unclosed string, object or array at the
  // end is what a truncated file looks like, and that is the more useful thing to say.
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  if (in_string || depth > 0 || e == simdjson::UNCLOSED_STRING || e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT)
    return "truncated JSON";
  return std::string("not valid JSON (") + simdjson::error_message(e) + ")";
}

Result<ProfileText> read_profile_bytes(const std::string& path, bool* was_gzip) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Err(path + ": " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) return Err(path + ": is a directory, not a profile file");
  // A FIFO, socket or device would block or never end: only regular files are profiles.
  if (!S_ISREG(st.st_mode))
    return Err(path + ": not a regular file (a pipe or device?); give a profile file");
  auto mapped = map_file(path);
  if (!mapped) return Err(mapped.error());
  std::string_view bytes = mapped->view();
  if (bytes.empty()) return Err(path + ": empty file");
  bool gz = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
            static_cast<unsigned char>(bytes[1]) == 0x8b;
  if (was_gzip) *was_gzip = gz;
  if (gz) {
    auto text = inflate_capped(bytes, path);
    if (!text) return text;
    if (text->empty()) return Err(path + ": empty file (inside gzip)");
    if (!starts_like_json_object(text->view().substr(0, 4096)))
      return Err(path + ": not a profile (the gzip data is not JSON)");
    return text;
  }
  // Decide on the first bytes, before copying a large file that is no profile at all.
  if (!starts_like_json_object(bytes.substr(0, 4096))) {
    bool blank = bytes.find_first_not_of(" \t\r\n") == std::string_view::npos;
    return Err(path + (blank ? ": empty file" : ": not a profile (neither JSON nor gzip)"));
  }
  // Copied (a file mapping has no padding after its end) into a buffer like the inflated one.
  auto copy = map_anonymous(bytes.size() + kPadding);
  if (!copy) return Err(path + ": " + copy.error());
  std::memcpy(copy->data(), bytes.data(), bytes.size());
  return ProfileText(std::move(*copy), bytes.size());
}

Result<model::Profile> read_gecko(const std::string& json, const std::string& name, ReadInfo* info) {
  ReadInfo local;
  ReadInfo& i = info ? *info : local;
  if (json.capacity() < json.size() + kPadding) {
    std::string copy;
    copy.reserve(json.size() + kPadding);
    copy.assign(json);
    Reader r(name, copy, copy.capacity(), i);
    return r.run();
  }
  Reader r(name, json, json.capacity(), i);
  return r.run();
}

Result<model::Profile> read_gecko(const ProfileText& json, const std::string& name, ReadInfo* info) {
  ReadInfo local;
  Reader r(name, json.view(), json.capacity(), info ? *info : local);
  return r.run();
}

Result<model::Profile> read_gecko_profile(const std::string& path, ReadInfo* info) {
  ReadInfo local;
  ReadInfo& i = info ? *info : local;
  auto text = read_profile_bytes(path, &i.gzip);
  if (!text) return Err(text.error());
  return read_gecko(*text, path, &i);
}

}  // namespace fxprof::exporter
