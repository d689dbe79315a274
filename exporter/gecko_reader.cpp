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
#include "exporter/profile_stream.h"

namespace fxprof::exporter {
namespace {

namespace od = simdjson::ondemand;
constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;

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
  Reader(const std::string& name, internal::JsonStream& js, ReadInfo& info)
      : name_(name), js_(js), info_(info) {}

  Result<model::Profile> run() {
    const int first = js_.peek();
    if (first < 0) return Err(name_ + ": " + (js_.failed() ? js_.error() : std::string("empty file")));
    if (first != '{') return Err(name_ + ": not a Firefox Profiler profile (not a JSON object)");
    start_process();
    bool ok = members([&](std::string_view k) {
      if (k == "profile" && !saw_meta_) {  // {profile: <gecko>} (old DevTools export): unwrap
        if (js_.peek() != '{') return skip();
        return members([&](std::string_view k2) { return process_member(k2, true); });
      }
      return process_member(k, true);
    });
    if (!ok) return Err(err_);
    if (info_.processed) return model::Profile{};
    // Only whitespace may follow; reading to the end also checks the rest of the gzip data.
    if (js_.peek() >= 0) return Err(name_ + ": not valid JSON (more after the profile's object)");
    if (js_.failed()) return Err(name_ + ": " + js_.error());
    finish_process(0, true);
    if (!saw_meta_) return Err(name_ + ": not a Firefox Profiler profile (no \"meta\" object)");
    if (!saw_threads_) return Err(name_ + ": not a Firefox Profiler profile (no \"threads\" array)");
    return std::move(p_);
  }

 private:
  // ---- the outline: the top-level object, `threads` and `processes`, streamed ----

  bool stream_error() {
    if (err_.empty()) err_ = name_ + ": " + (js_.failed() ? js_.error() : std::string("truncated JSON"));
    return false;
  }
  bool syntax_error() {
    if (err_.empty()) {
      err_ = name_ + ": not valid JSON (unexpected '" + std::string(1, static_cast<char>(js_.peek())) +
             "' near byte " + std::to_string(js_.offset()) + ")";
    }
    return false;
  }
  bool skip() { return js_.value(nullptr) || stream_error(); }

  // What follows a member or an element: ',' and another (Item), `close` (Closed), or an error (Failed, err_
  // set). The separator or the closing byte is consumed.
  enum class Next { Item, Closed, Failed };
  Next next(char close) {
    const int c = js_.peek();
    if (c == ',' || c == close) {
      js_.take();
      return c == ',' ? Next::Item : Next::Closed;
    }
    if (c < 0)
      stream_error();
    else
      syntax_error();
    return Next::Failed;
  }

  // The members of the object that starts at the next byte: `member(key)` reads each value.
  template <class F>
  bool members(F&& member) {
    js_.take();  // '{'
    int c = js_.peek();
    if (c == '}') {
      js_.take();
      return true;
    }
    std::string key;
    for (;;) {
      if (c < 0) return stream_error();
      if (c != '"') return syntax_error();
      if (!js_.string(key, 64)) return stream_error();
      c = js_.peek();
      if (c < 0) return stream_error();
      if (c != ':') return syntax_error();
      js_.take();
      if (js_.peek() < 0) return stream_error();
      if (!member(std::string_view(key))) return false;
      if (info_.processed) return true;  // nothing more to read
      if (const Next n = next('}'); n != Next::Item) return n == Next::Closed;
      c = js_.peek();
    }
  }
  // The elements of the value at the next byte when it is an array (`element()` reads each), else skips it.
  template <class F>
  bool array(F&& element) {
    if (js_.peek() != '[') return skip();
    js_.take();
    int c = js_.peek();
    if (c == ']') {
      js_.take();
      return true;
    }
    for (;;) {
      if (c < 0) return stream_error();
      if (!element()) return false;
      if (info_.processed) return true;
      if (const Next n = next(']'); n != Next::Item) return n == Next::Closed;
      c = js_.peek();
    }
  }

  // The value at the next byte as text of its own, parsed by simdjson and handed to `read(value)`; a
  // scalar where an object or array belongs is skipped, as the readers below skip a value of the wrong type.
  template <class F>
  bool piece(F&& read) {
    const int c = js_.peek();
    if (c != '{' && c != '[') return skip();
    piece_.clear();
    piece_offset_ = js_.offset();
    if (!js_.value(&piece_)) return stream_error();
    return parse_piece(read);
  }
  // The value at the next byte, of any type, as the one element of an array (simdjson hands out no value of
  // a scalar document).
  template <class F>
  bool element(F&& read) {
    piece_.clear();
    piece_offset_ = js_.offset() - 1;  // of the '[' put before it
    if (!put("[")) return false;
    if (!js_.value(&piece_)) return stream_error();
    if (!put("]")) return false;
    return parse_piece([&](od::value a) { return elements(a, read); });
  }
  bool put(std::string_view bytes) {
    if (auto s = piece_.append(bytes.data(), bytes.size()); !s) {
      if (err_.empty()) err_ = name_ + ": " + s.error();
      return false;
    }
    return true;
  }
  template <class F>
  bool parse_piece(F&& read) {
    od::document doc;
    if (auto e =
            parser_.iterate(simdjson::padded_string_view(piece_.data(), piece_.size(), piece_.capacity()))
                .get(doc))
      return set(e);
    doc_ = &doc;
    od::value v;
    bool ok = false;
    if (auto e = doc.get_value().get(v))
      ok = set(e);
    else
      ok = read(v);
    doc_ = nullptr;
    return ok;
  }

  // One member of a process object (the top level or an entry of `processes`), in document order.
  bool process_member(std::string_view k, bool top) {
    if (k == "meta") return piece([&](od::value v) { return read_meta(v, top); });
    if (k == "libs") return piece([&](od::value v) { return read_libs(v); });
    if (k == "counters") return piece([&](od::value v) { return read_counters(v); });
    if (k == "threads") {
      saw_threads_ |= top && js_.peek() == '[';
      return array([&] { return thread(); });
    }
    if (k == "processes" && top) {
      const size_t parent = cur_;
      bool ok = array([&] {
        if (js_.peek() != '{') return skip();
        start_process();
        const size_t me = cur_;
        bool pok = members([&](std::string_view k2) { return process_member(k2, false); });
        if (pok && !info_.processed) finish_process(me, false);
        return pok;
      });
      cur_ = parent;
      return ok;
    }
    return skip();
  }

  // ---- the pieces ----

  Error fail(simdjson::error_code e) {
    if (e == simdjson::NUMBER_ERROR || e == simdjson::NUMBER_OUT_OF_RANGE) {
      return Err(name_ + ": a number beyond the range of a double" + where());
    }
    return Err(name_ + ": " + describe_json_error(piece_.view(), static_cast<int>(e)));
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
    return " (near byte " + std::to_string(piece_offset_ + static_cast<uint64_t>(at - piece_.data())) + ")";
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
    uint64_t start = st.has_mono ? st.mono_ns
                                 : to_ns(static_cast<double>(p_.meta.start_monotonic_ns) +
                                         rel_to_ns(st.start_unix_ms - p_.meta.start_unix_ms));
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
    for (model::Counter& c : proc.counters)
      for (model::CounterSample& cs : c.samples) cs.time_ns += start;
    if (proc.name.empty() && !proc.threads.empty()) proc.name = proc.threads[0].name;
  }
  // Nanoseconds as uint64: negative or NaN is 0, beyond 2^64 saturates (a hostile file's 1e300 ms).
  static uint64_t to_ns(double ns) {
    if (!(ns > 0)) return 0;
    return ns >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(ns);
  }
  static uint64_t shift(uint64_t start, double ms) {
    return to_ns(static_cast<double>(start) + rel_to_ns(ms));
  }
  // Relative ms -> ns offset stored until finish_process adds the start (negative clamps to 0).
  static uint64_t rel(double ms) { return to_ns(rel_to_ns(ms)); }

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

  // Counter tracks (exporter/gecko.cpp write_counters: `count` is the model's delta, `number` its count),
  // their times relative to the process start until finish_process.
  bool read_counters(od::value v) {
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

  // ---- threads ----

  struct ThreadTables {
    Schema samples_schema, markers_schema, stack_schema, frame_schema;
    std::vector<std::pair<int64_t, int64_t>> stacks;  // (prefix, frame), local
    std::vector<LocalFrame> frames;
    std::vector<std::string> strings;
    std::vector<int64_t> marker_names;  // local string index per marker
  };

  // A thread, member by member: its samples table in batches of rows (the largest part of a profile),
  // every other member as a piece of its own.
  bool thread() {
    if (js_.peek() != '{') return skip();
    model::Thread t;
    ThreadTables tt;
    std::string process_name;
    bool ok = members([&](std::string_view k) {
      if (k == "samples") return samples(t, tt);
      if (k != "name" && k != "processName" && k != "pid" && k != "tid" && k != "registerTime" &&
          k != "unregisterTime" && k != "markers" && k != "stackTable" && k != "frameTable" &&
          k != "stringTable")
        return skip();
      return element([&](od::value f) { return thread_field(k, f, t, tt, process_name); });
    });
    if (!ok) return false;
    model::Process& proc = p_.processes[cur_];
    t.is_main = t.name == "GeckoMain";
    if (t.is_main) t.name = process_name;
    if (proc.name.empty()) proc.name = process_name;
    if (!finish_thread(proc, t, tt)) return false;
    proc.threads.push_back(std::move(t));
    return true;
  }

  bool thread_field(std::string_view k, od::value f, model::Thread& t, ThreadTables& tt,
                    std::string& process_name) {
    model::Process& proc = p_.processes[cur_];
    if (k == "name") return string(f, t.name);
    if (k == "processName") return string(f, process_name);
    if (k == "pid") {
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
  }

  struct SampleRow {
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

  bool samples(model::Thread& t, ThreadTables& tt) {
    if (js_.peek() != '{') return skip();
    return members([&](std::string_view k) {
      if (k == "schema") return element([&](od::value v) { return schema(v, tt.samples_schema); });
      if (k != "data") return skip();
      return sample_rows(t, tt);
    });
  }

  // The rows of a samples table, kSampleBatch at a time: each batch is an array of its own for simdjson, so
  // that a thread's samples are never held as text whole (they are most of its text).
  static constexpr size_t kSampleBatch = 65536;
  bool sample_rows(model::Thread& t, ThreadTables& tt) {
    SampleRow row{*this,
                  t,
                  tt.samples_schema.at("stack"),
                  tt.samples_schema.at("time"),
                  tt.samples_schema.at("threadCPUDelta"),
                  {}};
    if (row.cs < 0 || row.ct < 0) return bad("samples without a stack or time column");
    if (js_.peek() != '[') return skip();
    js_.take();
    int c = js_.peek();
    if (c == ']') {
      js_.take();
      return true;
    }
    for (bool last = false; !last;) {
      piece_.clear();
      piece_offset_ = js_.offset() - 1;  // the batch's '[' stands for the array's '[' or a ','
      if (!put("[")) return false;
      for (size_t n = 0;;) {
        if (c < 0) return stream_error();
        if (n > 0 && !put(",")) return false;
        if (!js_.value(&piece_)) return stream_error();
        ++n;
        c = js_.peek();
        if (c == ',') {
          js_.take();
          c = js_.peek();
          if (n == kSampleBatch) break;
          continue;
        }
        if (c == ']') {
          js_.take();
          last = true;
          break;
        }
        return c < 0 ? stream_error() : syntax_error();
      }
      if (!put("]")) return false;
      if (!parse_piece([&](od::value rows) {
            return rows_counted(rows, row, [&](size_t n) {
              if (t.samples.capacity() < t.samples.size() + n)
                t.samples.reserve(std::max(t.samples.size() + n, t.samples.capacity() * 2));
            });
          }))
        return false;
    }
    return true;
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
  internal::JsonStream& js_;
  ReadInfo& info_;
  // One parser and one buffer for every piece: they grow to the largest (a thread) and are reused.
  od::parser parser_;
  internal::PieceBuffer piece_{kPadding};
  uint64_t piece_offset_ = 0;  // of the piece in the whole text
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

Result<std::string> read_profile_bytes(const std::string& path, bool* was_gzip) {
  auto opened = internal::open_profile_source(path);
  if (!opened) return Err(opened.error());
  if (was_gzip) *was_gzip = opened->gzip;
  std::string out;
  for (;;) {
    if (out.capacity() - out.size() < 65536) out.reserve(out.capacity() * 2 + 65536);
    const size_t old = out.size();
    out.resize(out.capacity());
    auto n = opened->source->read(out.data() + old, out.size() - old);
    if (!n) return Err(path + ": " + n.error());
    out.resize(old + *n);
    if (*n == 0) break;
  }
  if (opened->gzip && out.empty()) return Err(path + ": empty file (inside gzip)");
  if (opened->gzip && !internal::starts_like_json_object(std::string_view(out).substr(0, 4096)))
    return Err(path + ": not a profile (the gzip data is not JSON)");
  return out;
}

Result<model::Profile> read_gecko(std::string_view json, const std::string& name, ReadInfo* info,
                                  size_t chunk_bytes, size_t max_string_bytes) {
  ReadInfo local;
  auto source = internal::memory_source(json, chunk_bytes);
  internal::JsonStream js(*source, std::max<size_t>(std::min(chunk_bytes, json.size()), 4096),
                          max_string_bytes);
  if (!js.prefetch(3)) return Err(name + ": " + js.error());
  js.skip_bom();
  Reader r(name, js, info ? *info : local);
  return r.run();
}

Result<model::Profile> read_gecko_profile(const std::string& path, ReadInfo* info) {
  ReadInfo local;
  ReadInfo& i = info ? *info : local;
  auto opened = internal::open_profile_source(path);
  if (!opened) return Err(opened.error());
  i.gzip = opened->gzip;
  internal::JsonStream js(*opened->source, kReadChunkBytes, kMaxJsonStringBytes);
  if (!js.prefetch(4096)) return Err(path + ": " + js.error());
  if (opened->gzip) {  // the first inflated bytes decide, before inflating on
    if (js.buffered().empty()) return Err(path + ": empty file (inside gzip)");
    if (!internal::starts_like_json_object(js.buffered().substr(0, 4096)))
      return Err(path + ": not a profile (the gzip data is not JSON)");
  }
  js.skip_bom();
  Reader r(path, js, i);
  return r.run();
}

}  // namespace fxprof::exporter
