// fxprof gecko (internal to the Gecko reader): the reader's state and the helpers its pieces share. The
// reader is split by concern: gecko_reader.cpp (entry points), _outline (the streamed outline and errors),
// _process (meta, libs, counters), _thread, _samples, _stacks (stack and frame tables), _markers.
#pragma once

#include <simdjson.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"
#include "gecko/gecko_reader.h"
#include "gecko/profile_stream.h"
#include "model/profile.h"

namespace fxprof::gecko::internal {

namespace od = simdjson::ondemand;
inline constexpr size_t kPadding = simdjson::SIMDJSON_PADDING;

// ---- the JSON reader ----

inline double rel_to_ns(double ms) { return std::round(ms * 1e6); }

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

  Result<model::Profile> run();  // gecko_reader.cpp

 private:
  // ---- the outline: the top-level object, `threads` and `processes`, streamed ----
  // (stream_error, syntax_error, process_member: gecko_reader_outline.cpp)

  bool stream_error();
  bool syntax_error();
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
      if (info_.processed && !info_.libs_only) return true;  // nothing more to read
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
      if (info_.processed && !info_.libs_only) return true;
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

  bool process_member(std::string_view k, bool top);
  // Whether the value at the next byte is an object whose first key is neither "schema" nor "data": a
  // processed-format table (columns: {"length", "prefix": [...], ...}), never a Gecko one ({schema, data}).
  // Looked at in the buffered text, nothing consumed, before the table is copied whole as a piece (a
  // processed profile's stackTable of 300 MB took 1.5 GB to refuse). gecko_reader_thread.cpp.
  bool columns_table();

  // ---- the pieces ----
  // (fail, set, bad, where, schema: gecko_reader_outline.cpp)

  Error fail(simdjson::error_code e);
  bool set(simdjson::error_code e);
  bool bad(const std::string& what);
  std::string where();

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
  bool schema(od::value v, Schema& s);
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

  // ---- document structure (gecko_reader_process.cpp) ----

  void start_process();
  struct ProcState {
    bool has_start = false;
    double start_unix_ms = 0;
    bool has_mono = false;
    uint64_t mono_ns = 0;
    double shutdown_ms = NAN;
    double profiling_end_ms = NAN;
    double heap_peak_ms = NAN;
  };

  void finish_process(size_t index, bool top);
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

  bool read_meta(od::value v, bool top);
  // read_meta's members that are objects or lists of their own.
  bool read_categories(od::value v, std::vector<model::CategoryInfo>& out);
  bool read_meta_extra(od::value v);
  bool read_meta_heap(od::value v, ProcState& st);
  bool read_marker_schemas(od::value v);
  bool read_libs(od::value v);
  bool read_counters(od::value v);

  // ---- threads (gecko_reader_thread.cpp; the tables in _samples, _stacks, _markers) ----

  struct ThreadTables {
    Schema samples_schema, markers_schema, stack_schema, frame_schema;
    // (prefix, frame), local; 32 bits each (a --heap=full profile's million stacks: 8 MB, not 16): an index
    // beyond them is out of range anyway (StackRow::end).
    std::vector<std::pair<int32_t, int32_t>> stacks;
    std::vector<LocalFrame> frames;
    std::vector<std::string> strings;
    std::vector<int64_t> marker_names;  // local string index per marker
  };

  bool thread();
  bool thread_field(std::string_view k, od::value f, model::Thread& t, ThreadTables& tt,
                    std::string& process_name);

  struct SampleRow;
  bool samples(model::Thread& t, ThreadTables& tt);
  static constexpr size_t kSampleBatch = 65536;
  // And at most about this much text a batch: a marker row with its payload is ~190 bytes, 65536 of them
  // 12 MB of text and 62 MB of simdjson's index.
  static constexpr size_t kBatchBytes = size_t{2} << 20;
  bool sample_rows(model::Thread& t, ThreadTables& tt);
  // The `data` array at the next byte, kSampleBatch rows at a time: each batch is an array of its own for
  // simdjson, so that a table is never held as text whole, nor simdjson's index of it (~5x the text: a
  // cc1plus --heap=full profile's 55 MB markers table, its allocations, took 279 MB as one piece).
  // `reserve(n)` gets each batch's row count first.
  template <class F, class R>
  bool batched_rows(F& row, R&& reserve) {
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
          if (n == kSampleBatch || piece_.size() >= kBatchBytes) break;
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
      if (!parse_piece([&](od::value rows) { return rows_counted(rows, row, reserve); })) return false;
    }
    return true;
  }

  // A {schema, data} table at the next byte, member by member: `schema_into` from its schema, then
  // `data(...)` reads its data array (batched_rows) once the schema is in.
  template <class D>
  bool table(Schema& schema_into, D&& data) {
    if (js_.peek() != '{') return skip();
    return members([&](std::string_view k) {
      if (k == "schema") return element([&](od::value v) { return schema(v, schema_into); });
      if (k != "data") return skip();
      return data();
    });
  }

  struct MarkerRow;
  bool markers(model::Thread& t, ThreadTables& tt);
  struct StackRow;
  bool stacks(ThreadTables& tt);
  bool payload(od::value v, model::Marker& m);

  bool read_frames(od::value v, ThreadTables& tt);
  model::BinaryId binary_named(const model::Process& proc, std::string_view name);
  static bool parse_address(std::string_view s, uint64_t& out);
  model::FrameId make_frame(const model::Process& proc, const ThreadTables& tt, const LocalFrame& lf);

  bool finish_thread(const model::Process& proc, model::Thread& t, ThreadTables& tt);

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

}  // namespace fxprof::gecko::internal
