// symbolicate_profile(): bakes names into a Gecko profile so that it opens with no symbol server.
//
// Two passes over one simdjson DOM: the first collects every (library, relative address) the front end would
// ask about, exactly as it would ask (per-process libs, callers nudged by -1), so that each library is looked
// up once with all its addresses; the second streams the profile out through the JsonWriter, copying
// everything verbatim except the per-thread frame/stack/string tables, the stack columns that point into
// them (samples, marker backtraces) and meta.presymbolicated.
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <utility>

#include "exporter/json_writer.h"
#include "server/internal.h"
#include "server/server.h"

namespace fxprof::server {
namespace {

namespace dom = simdjson::dom;
constexpr size_t kNone = SIZE_MAX;
constexpr int64_t kNull = -1;
constexpr uint8_t kLeaf = 1, kCaller = 2;

// ---- verbatim copies of DOM values ----

void append_number(std::string& out, double d) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);  // shortest form that round-trips
  out.append(buf, r.ptr);
}

void append_value(std::string& out, dom::element e) {
  switch (e.type()) {
    case dom::element_type::ARRAY: {
      out += '[';
      bool first = true;
      for (dom::element c : dom::array(e)) {
        if (!first) out += ',';
        first = false;
        append_value(out, c);
      }
      out += ']';
      break;
    }
    case dom::element_type::OBJECT: {
      out += '{';
      bool first = true;
      for (dom::key_value_pair kv : dom::object(e)) {
        if (!first) out += ',';
        first = false;
        fxprof::append_json_string(out, kv.key);
        out += ':';
        append_value(out, kv.value);
      }
      out += '}';
      break;
    }
    case dom::element_type::STRING:
      fxprof::append_json_string(out, std::string_view(e));
      break;
    case dom::element_type::INT64:
      out += std::to_string(int64_t(e));
      break;
    case dom::element_type::UINT64:
      out += std::to_string(uint64_t(e));
      break;
    case dom::element_type::DOUBLE:
      append_number(out, double(e));
      break;
    case dom::element_type::BOOL:
      out += bool(e) ? "true" : "false";
      break;
    case dom::element_type::NULL_VALUE:
      out += "null";
      break;
  }
}

class Copier {
 public:
  explicit Copier(exporter::JsonWriter& w) : w_(w) {}
  void copy(dom::element e) {
    buf_.clear();
    append_value(buf_, e);
    w_.raw(buf_);
  }

 private:
  exporter::JsonWriter& w_;
  std::string buf_;
};

// ---- libraries and processes ----

struct Lib {
  symbolizer::KnownLib known;
  std::string display;          // "(in <display>)"
  std::vector<uint64_t> addrs;  // wanted relative addresses; sorted and unique before lookup
  std::vector<symbolizer::SymbolInfo> infos;
  bool looked_up = false;

  const symbolizer::SymbolInfo* find(uint64_t rel) const {
    if (!looked_up) return nullptr;
    auto it = std::lower_bound(addrs.begin(), addrs.end(), rel);
    if (it == addrs.end() || *it != rel) return nullptr;
    const auto& info = infos[static_cast<size_t>(it - addrs.begin())];
    return info.found && !info.function.empty() ? &info : nullptr;
  }
};

struct Range {
  uint64_t start, end, base;
  size_t lib;  // kNone: a mapping the front end cannot symbolicate either (no debugName/breakpadId)
};

struct Process {
  dom::object obj;
  std::vector<Range> ranges;  // sorted by start

  const Range* find(uint64_t addr) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), addr,
                               [](uint64_t a, const Range& r) { return a < r.start; });
    if (it == ranges.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  }
};

struct Context {
  std::vector<Lib> libs;
  std::map<std::pair<std::string, std::string>, size_t> lib_index;
  std::vector<Process> processes;  // depth-first, in document order
  bool local_paths = false;
};

std::string get_str(dom::object o, const char* key) {
  std::string_view v;
  if (o[key].get_string().get(v)) return {};
  return std::string(v);
}

uint64_t get_u64(dom::object o, const char* key) {
  dom::element e;
  if (o[key].get(e)) return 0;
  uint64_t u;
  if (!e.get_uint64().get(u)) return u;
  double d;
  if (!e.get_double().get(d) && d >= 0) return static_cast<uint64_t>(d);
  return 0;
}

void gather(dom::object obj, int depth, Context& ctx) {
  Process proc{obj, {}};
  dom::array libs;
  if (!obj["libs"].get_array().get(libs)) {
    for (dom::element le : libs) {
      dom::object l;
      if (le.get_object().get(l)) continue;
      Range r{get_u64(l, "start"), get_u64(l, "end"), 0, kNone};
      r.base = r.start - get_u64(l, "offset");
      symbolizer::KnownLib k{get_str(l, "debugName"), get_str(l, "breakpadId"), get_str(l, "name"),
                             get_str(l, "path"),      get_str(l, "debugPath"),  get_str(l, "codeId"),
                             get_str(l, "arch")};
      if (!k.path.empty() && k.path[0] == '/') ctx.local_paths = true;
      if (!k.debug_name.empty() && !k.breakpad_id.empty()) {
        auto [it, inserted] =
            ctx.lib_index.emplace(std::make_pair(k.debug_name, k.breakpad_id), ctx.libs.size());
        if (inserted) {
          Lib lib;
          lib.display = !k.name.empty() ? k.name : k.debug_name;
          lib.known = std::move(k);
          ctx.libs.push_back(std::move(lib));
        }
        r.lib = it->second;
      }
      if (r.end > r.start) proc.ranges.push_back(r);
    }
  }
  std::sort(proc.ranges.begin(), proc.ranges.end(),
            [](const Range& a, const Range& b) { return a.start < b.start; });
  ctx.processes.push_back(std::move(proc));
  dom::array subs;
  if (depth < 8 && !obj["processes"].get_array().get(subs)) {
    for (dom::element p : subs) {
      dom::object po;
      if (!p.get_object().get(po)) gather(po, depth + 1, ctx);
    }
  }
}

// ---- one thread's tables ----

int64_t column(dom::object table, const char* name) {
  int64_t c;
  if (table["schema"][name].get_int64().get(c) || c < 0 || c > 1000) return kNull;
  return c;
}

int64_t cell_index(dom::array row, int64_t col) {
  if (col < 0) return kNull;
  int64_t v;
  if (row.at(static_cast<size_t>(col)).get_int64().get(v) || v < 0) return kNull;
  return v;
}

struct Thread {
  dom::object frame_table, stack_table;
  dom::array frame_rows, stack_rows, strings;
  int64_t loc_col = kNull, line_col = kNull, prefix_col = kNull, frame_col = kNull;
  std::vector<int64_t> prefix, frame;  // per stack
  std::vector<uint8_t> roles;          // per stack: kLeaf | kCaller
  std::vector<const Range*> range;     // per frame: its lib mapping, if a native address in one
  std::vector<uint64_t> rel;           // per frame: lib-relative address
};

// The stack indices named by a samples-shaped table {schema:{stack}, data:[[...]]}.
template <class F>
void for_each_sample_stack(dom::object samples, F&& f) {
  int64_t col = column(samples, "stack");
  dom::array data;
  if (col < 0 || samples["data"].get_array().get(data)) return;
  for (dom::element row : data) {
    dom::array r;
    if (row.get_array().get(r)) continue;
    f(cell_index(r, col));
  }
}

// Marker rows whose payload carries a backtrace: {data: {stack: {samples: {...}}}}.
template <class F>
void for_each_marker_stack(dom::object thread, F&& f) {
  dom::object markers;
  if (thread["markers"].get_object().get(markers)) return;
  int64_t data_col = column(markers, "data");
  dom::array rows;
  if (data_col < 0 || markers["data"].get_array().get(rows)) return;
  for (dom::element row : rows) {
    dom::object payload, stack, samples;
    if (row.at(static_cast<size_t>(data_col)).get_object().get(payload)) continue;
    if (payload["stack"].get_object().get(stack) || stack["samples"].get_object().get(samples)) continue;
    for_each_sample_stack(samples, f);
  }
}

// Reads the tables of a thread; false (and a message) when they are not ones we can rewrite faithfully.
Result<bool> analyze(dom::object t, const Process& proc, Thread& th) {
  if (t["frameTable"].get_object().get(th.frame_table) || t["stackTable"].get_object().get(th.stack_table) ||
      t["stringTable"].get_array().get(th.strings) || th.frame_table["data"].get_array().get(th.frame_rows) ||
      th.stack_table["data"].get_array().get(th.stack_rows)) {
    return false;  // not a Gecko thread with tables: copied as it is
  }
  th.loc_col = column(th.frame_table, "location");
  th.line_col = column(th.frame_table, "line");
  th.prefix_col = column(th.stack_table, "prefix");
  th.frame_col = column(th.stack_table, "frame");
  if (th.loc_col < 0 || th.prefix_col < 0 || th.frame_col < 0)
    return Err("a thread's table schema is incomplete");

  const size_t nframes = th.frame_rows.size(), nstacks = th.stack_rows.size(), nstrings = th.strings.size();
  std::vector<std::string_view> strings;
  strings.reserve(nstrings);
  for (dom::element s : th.strings) {
    std::string_view v;
    strings.push_back(s.get_string().get(v) ? std::string_view() : v);
  }
  th.range.assign(nframes, nullptr);
  th.rel.assign(nframes, 0);
  size_t i = 0;
  for (dom::element fe : th.frame_rows) {
    dom::array row;
    if (fe.get_array().get(row)) return Err("a frameTable row is not an array");
    int64_t loc = cell_index(row, th.loc_col);
    if (loc < 0 || static_cast<size_t>(loc) >= nstrings)
      return Err("a frame's location is not a string index");
    std::string_view s = strings[static_cast<size_t>(loc)];
    uint64_t addr = 0;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      auto r = std::from_chars(s.data() + 2, s.data() + s.size(), addr, 16);
      if (r.ec == std::errc() && r.ptr == s.data() + s.size()) {
        if (const Range* range = proc.find(addr); range && range->lib != kNone) {
          th.range[i] = range;
          th.rel[i] = addr - range->base;
        }
      }
    }
    ++i;
  }
  th.prefix.resize(nstacks);
  th.frame.resize(nstacks);
  th.roles.assign(nstacks, 0);
  i = 0;
  for (dom::element se : th.stack_rows) {
    dom::array row;
    if (se.get_array().get(row)) return Err("a stackTable row is not an array");
    int64_t p = cell_index(row, th.prefix_col), f = cell_index(row, th.frame_col);
    // A forward prefix hangs the front end; refuse rather than bake it in.
    if (p != kNull && static_cast<size_t>(p) >= i) return Err("the stack table is not in topological order");
    if (f < 0 || static_cast<size_t>(f) >= nframes) return Err("a stack's frame index is out of range");
    th.prefix[i] = p;
    th.frame[i] = f;
    if (p != kNull) th.roles[static_cast<size_t>(p)] |= kCaller;
    ++i;
  }
  auto mark = [&](uint8_t role) {
    return [&th, role](int64_t s) {
      if (s >= 0 && static_cast<size_t>(s) < th.roles.size()) th.roles[static_cast<size_t>(s)] |= role;
    };
  };
  dom::object samples;
  if (!t["samples"].get_object().get(samples)) for_each_sample_stack(samples, mark(kLeaf));
  for_each_marker_stack(t, mark(kCaller));  // backtrace frames are return addresses, the leaf included
  for (auto& r : th.roles) {
    if (r == 0) r = kLeaf;  // unused stacks are kept, as leaves
  }
  return true;
}

// The address the front end would send for frame f in a role: callers hold return addresses, and the call
// instruction is the byte before (the front end's nudgeReturnAddresses).
uint64_t lookup_address(const Thread& th, size_t f, uint8_t role) {
  return role == kCaller && th.rel[f] > 0 ? th.rel[f] - 1 : th.rel[f];
}

// ---- writing one thread ----

struct NewFrame {
  size_t orig;
  int64_t location = kNull;  // new string index, or kNull: copy the original row as it is
  uint32_t line = 0;
};

class ThreadWriter {
 public:
  ThreadWriter(Context& ctx, Thread& th) : ctx_(ctx), th_(th) {}

  void build() {
    const size_t nframes = th_.frame_rows.size(), nstacks = th_.prefix.size();
    chains_.assign(nframes * 3, {});
    var_.assign(nstacks, {kNull, kNull});
    for (size_t s = 0; s < nstacks; ++s) {
      int64_t parent = th_.prefix[s] == kNull ? kNull : var_[static_cast<size_t>(th_.prefix[s])][1];
      const std::vector<uint32_t>* built[2] = {nullptr, nullptr};
      for (int ri = 0; ri < 2; ++ri) {
        uint8_t role = ri == 0 ? kLeaf : kCaller;
        if (!(th_.roles[s] & role)) continue;
        const std::vector<uint32_t>& chain = frames_for(static_cast<size_t>(th_.frame[s]), role);
        if (ri == 1 && built[0] && *built[0] == chain) {
          var_[s][1] = var_[s][0];  // same frames in both roles: one stack
          continue;
        }
        int64_t p = parent;
        for (uint32_t nf : chain) {
          stacks_.push_back({p, nf, s});
          p = static_cast<int64_t>(stacks_.size() - 1);
        }
        var_[s][ri] = p;
        built[ri] = &chain;
      }
    }
  }

  int64_t leaf_stack(int64_t s) const { return valid(s) ? var_[static_cast<size_t>(s)][0] : kNull; }
  int64_t caller_stack(int64_t s) const {
    if (!valid(s)) return kNull;
    auto v = var_[static_cast<size_t>(s)];
    return v[1] != kNull ? v[1] : v[0];
  }

  void write_thread(dom::object t, exporter::JsonWriter& w, Copier& copy) {
    w.begin_object();
    for (dom::key_value_pair kv : t) {
      w.key(kv.key);
      if (kv.key == "frameTable") {
        write_table(th_.frame_table, w, copy, [&] { write_frames(w, copy); });
      } else if (kv.key == "stackTable") {
        write_table(th_.stack_table, w, copy, [&] { write_stacks(w, copy); });
      } else if (kv.key == "stringTable") {
        w.begin_array();
        for (dom::element s : th_.strings) copy.copy(s);
        for (const std::string& s : new_strings_) w.value(s);
        w.end_array();
      } else if (kv.key == "samples" && kv.value.is_object()) {
        write_samples(dom::object(kv.value), w, copy, false);
      } else if (kv.key == "markers" && kv.value.is_object()) {
        write_markers(dom::object(kv.value), w, copy);
      } else {
        copy.copy(kv.value);
      }
    }
    w.end_object();
  }

 private:
  bool valid(int64_t s) const { return s >= 0 && static_cast<size_t>(s) < var_.size(); }

  uint32_t intern(std::string s) {
    auto [it, inserted] = string_index_.emplace(s, th_.strings.size() + new_strings_.size());
    if (inserted) new_strings_.push_back(std::move(s));
    return static_cast<uint32_t>(it->second);
  }

  // The new frames for original frame f in a role, outermost first.
  const std::vector<uint32_t>& frames_for(size_t f, uint8_t role) {
    const symbolizer::SymbolInfo* info = nullptr;
    const Range* range = th_.range[f];
    if (range) info = ctx_.libs[range->lib].find(lookup_address(th_, f, role));
    size_t slot = f * 3 + (info ? (role == kLeaf ? 0 : 1) : 2);
    std::vector<uint32_t>& chain = chains_[slot];
    if (!chain.empty()) return chain;
    if (!info) {
      frames_.push_back({f});
      chain.push_back(static_cast<uint32_t>(frames_.size() - 1));
      return chain;
    }
    // Names only: a Gecko location cannot carry a native frame's file (format doc 1.6: "foo (file:line)" is
    // read as JavaScript), so the file stays out and the line goes into the frame's line column.
    const std::string suffix = " (in " + ctx_.libs[range->lib].display + ")";
    frames_.push_back({f, intern(info->function + suffix), info->line});
    chain.push_back(static_cast<uint32_t>(frames_.size() - 1));
    for (auto it = info->inlines.rbegin(); it != info->inlines.rend(); ++it) {
      std::string name = it->function.empty() ? info->function : it->function;
      frames_.push_back({f, intern(name + suffix), it->line});
      chain.push_back(static_cast<uint32_t>(frames_.size() - 1));
    }
    return chain;
  }

  template <class F>
  void write_table(dom::object table, exporter::JsonWriter& w, Copier& copy, F&& write_data) {
    w.begin_object();
    for (dom::key_value_pair kv : table) {
      w.key(kv.key);
      if (kv.key == "data")
        write_data();
      else
        copy.copy(kv.value);
    }
    w.end_object();
  }

  void write_frames(exporter::JsonWriter& w, Copier& copy) {
    std::vector<dom::element> rows(th_.frame_rows.begin(), th_.frame_rows.end());
    w.begin_array();
    for (const NewFrame& nf : frames_) {
      if (nf.location == kNull) {
        copy.copy(rows[nf.orig]);
        continue;
      }
      write_row(dom::array(rows[nf.orig]), std::max(th_.loc_col, th_.line_col), w, copy, [&](int64_t i) {
        if (i == th_.loc_col) {
          w.value(nf.location);
        } else if (i == th_.line_col) {
          if (nf.line > 0)
            w.value(static_cast<int64_t>(nf.line));
          else
            w.null();
        } else {
          return false;
        }
        return true;
      });
    }
    w.end_array();
  }

  void write_stacks(exporter::JsonWriter& w, Copier& copy) {
    std::vector<dom::element> rows(th_.stack_rows.begin(), th_.stack_rows.end());
    w.begin_array();
    for (const NewStack& ns : stacks_) {
      write_row(dom::array(rows[ns.orig]), std::max(th_.prefix_col, th_.frame_col), w, copy, [&](int64_t i) {
        if (i == th_.prefix_col) {
          if (ns.prefix == kNull)
            w.null();
          else
            w.value(ns.prefix);
        } else if (i == th_.frame_col) {
          w.value(static_cast<int64_t>(ns.frame));
        } else {
          return false;
        }
        return true;
      });
    }
    w.end_array();
  }

  // Writes a row with some cells replaced (`replace(i)` writes cell i and returns true); the row grows with
  // nulls when a replaced column lies past its end.
  template <class F>
  void write_row(dom::array row, int64_t last, exporter::JsonWriter& w, Copier& copy, F&& replace) {
    w.begin_array();
    int64_t i = 0;
    for (dom::element cell : row) {
      if (!replace(i)) copy.copy(cell);
      ++i;
    }
    for (; i <= last; ++i) {
      if (!replace(i)) w.null();
    }
    w.end_array();
  }

  // A samples-shaped table with its stack column remapped (to leaf stacks, or caller stacks for backtraces).
  void write_samples(dom::object samples, exporter::JsonWriter& w, Copier& copy, bool backtrace) {
    int64_t col = column(samples, "stack");
    w.begin_object();
    for (dom::key_value_pair kv : samples) {
      w.key(kv.key);
      if (kv.key != "data" || col < 0 || !kv.value.is_array()) {
        copy.copy(kv.value);
        continue;
      }
      w.begin_array();
      for (dom::element re : dom::array(kv.value)) {
        if (!re.is_array()) {
          copy.copy(re);
          continue;
        }
        dom::array row(re);
        w.begin_array();
        size_t i = 0;
        for (dom::element cell : row) {
          if (static_cast<int64_t>(i++) == col && cell.is_int64()) {
            int64_t s = backtrace ? caller_stack(int64_t(cell)) : leaf_stack(int64_t(cell));
            if (s == kNull)
              w.null();
            else
              w.value(s);
          } else {
            copy.copy(cell);
          }
        }
        w.end_array();
      }
      w.end_array();
    }
    w.end_object();
  }

  void write_markers(dom::object markers, exporter::JsonWriter& w, Copier& copy) {
    int64_t data_col = column(markers, "data");
    w.begin_object();
    for (dom::key_value_pair kv : markers) {
      w.key(kv.key);
      if (kv.key != "data" || data_col < 0 || !kv.value.is_array()) {
        copy.copy(kv.value);
        continue;
      }
      w.begin_array();
      for (dom::element re : dom::array(kv.value)) {
        dom::object payload, stack, samples;
        bool has_stack = re.is_array() && !re.at(static_cast<size_t>(data_col)).get_object().get(payload) &&
                         !payload["stack"].get_object().get(stack) &&
                         !stack["samples"].get_object().get(samples);
        if (!has_stack) {
          copy.copy(re);
          continue;
        }
        w.begin_array();
        size_t i = 0;
        for (dom::element cell : dom::array(re)) {
          if (static_cast<int64_t>(i++) != data_col) {
            copy.copy(cell);
            continue;
          }
          w.begin_object();
          for (dom::key_value_pair p : payload) {
            w.key(p.key);
            if (p.key != "stack") {
              copy.copy(p.value);
              continue;
            }
            w.begin_object();
            for (dom::key_value_pair sk : stack) {
              w.key(sk.key);
              if (sk.key == "samples")
                write_samples(samples, w, copy, true);
              else
                copy.copy(sk.value);
            }
            w.end_object();
          }
          w.end_object();
        }
        w.end_array();
      }
      w.end_array();
    }
    w.end_object();
  }

  struct NewStack {
    int64_t prefix;
    uint32_t frame;
    size_t orig;
  };
  Context& ctx_;
  Thread& th_;
  std::vector<NewFrame> frames_;
  std::vector<NewStack> stacks_;
  std::vector<std::vector<uint32_t>> chains_;  // per original frame: [leaf, caller, unsymbolicated]
  std::vector<std::array<int64_t, 2>> var_;    // per original stack: new [leaf, caller] stack
  std::vector<std::string> new_strings_;
  std::unordered_map<std::string, size_t> string_index_;
};

// ---- the document ----

void write_meta(dom::object meta, exporter::JsonWriter& w, Copier& copy) {
  w.begin_object();
  bool written = false;
  for (dom::key_value_pair kv : meta) {
    w.key(kv.key);
    if (kv.key == "presymbolicated") {
      w.value(true);
      written = true;
    } else {
      copy.copy(kv.value);
    }
  }
  if (!written) w.key("presymbolicated").value(true);
  w.end_object();
}

Status write_process(dom::object obj, int depth, Context& ctx, size_t& next, exporter::JsonWriter& w,
                     Copier& copy) {
  const Process& proc = ctx.processes[next++];
  w.begin_object();
  for (dom::key_value_pair kv : obj) {
    w.key(kv.key);
    if (kv.key == "meta" && kv.value.is_object()) {
      write_meta(dom::object(kv.value), w, copy);
    } else if (kv.key == "threads" && kv.value.is_array()) {
      w.begin_array();
      for (dom::element te : dom::array(kv.value)) {
        Thread th;
        Result<bool> ok = te.is_object() ? analyze(dom::object(te), proc, th) : Result<bool>(false);
        if (!ok) return Err(ok.error());
        if (!*ok) {
          copy.copy(te);
          continue;
        }
        ThreadWriter tw(ctx, th);
        tw.build();
        tw.write_thread(dom::object(te), w, copy);
      }
      w.end_array();
    } else if (kv.key == "processes" && kv.value.is_array() && depth < 8) {
      w.begin_array();
      for (dom::element pe : dom::array(kv.value)) {
        if (!pe.is_object()) {
          copy.copy(pe);
          continue;
        }
        if (auto s = write_process(dom::object(pe), depth + 1, ctx, next, w, copy); !s) return s;
      }
      w.end_array();
    } else {
      copy.copy(kv.value);
    }
  }
  w.end_object();
  return {};
}

void warn_sharing_once(const std::string& out) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::fprintf(stderr,
               "fxprof: note: %s holds full local paths (of the program and its libraries) and the recorded\n"
               "        command lines; check that you may share them before uploading it.\n",
               out.c_str());
}

}  // namespace

Status symbolicate_profile(const std::string& in, const std::string& out, symbolizer::Symbolizer& symbols) {
  auto text = read_profile_file(in);
  if (!text) return Err(text.error());
  dom::parser parser;
  dom::element root;
  if (auto e = parser.parse(text->data(), text->size(), false).get(root)) {
    return Err(in + ": " + internal::describe_json_error(*text, e));
  }
  dom::object top, wrapped, meta;
  if (root.get_object().get(top)) return Err(in + ": not a Firefox Profiler profile (not a JSON object)");
  if (!top["profile"].get_object().get(wrapped)) top = wrapped;
  if (top["meta"].get_object().get(meta))
    return Err(in + ": not a Firefox Profiler profile (no \"meta\" object)");
  if (meta["preprocessedProfileVersion"].error() == simdjson::SUCCESS) {
    return Err(in +
               ": a processed-format profile; only Gecko profiles (what fxprof writes) can be symbolicated");
  }
  if (top["threads"].get_array().error())
    return Err(in + ": not a Firefox Profiler profile (no \"threads\" array)");

  Context ctx;
  gather(top, 0, ctx);
  for (const Lib& lib : ctx.libs) symbols.add_known_lib(lib.known);

  // Pass 1: every address the front end would ask for, per library.
  for (const Process& proc : ctx.processes) {
    dom::array threads;
    if (proc.obj["threads"].get_array().get(threads)) continue;
    for (dom::element te : threads) {
      Thread th;
      Result<bool> ok = te.is_object() ? analyze(dom::object(te), proc, th) : Result<bool>(false);
      if (!ok) return Err(in + ": " + ok.error());
      if (!*ok) continue;
      for (size_t s = 0; s < th.frame.size(); ++s) {
        size_t f = static_cast<size_t>(th.frame[s]);
        if (!th.range[f]) continue;
        Lib& lib = ctx.libs[th.range[f]->lib];
        if (th.roles[s] & kLeaf) lib.addrs.push_back(lookup_address(th, f, kLeaf));
        if (th.roles[s] & kCaller) lib.addrs.push_back(lookup_address(th, f, kCaller));
      }
    }
  }
  for (Lib& lib : ctx.libs) {
    if (lib.addrs.empty()) continue;
    std::sort(lib.addrs.begin(), lib.addrs.end());
    lib.addrs.erase(std::unique(lib.addrs.begin(), lib.addrs.end()), lib.addrs.end());
    auto r = symbols.lookup(lib.known.debug_name, lib.known.breakpad_id, lib.addrs);
    if (!r || r->size() != lib.addrs.size()) {
      // Pseudo-libraries ([vdso], [heap]...) have no file to read: not worth a warning on every recording.
      if (!lib.display.empty() && lib.display[0] == '[') continue;
      std::fprintf(stderr, "fxprof: warning: no symbols for %s: %s\n", lib.display.c_str(),
                   r ? "wrong number of results" : r.error().c_str());
      continue;
    }
    lib.infos = std::move(*r);
    lib.looked_up = true;
  }

  // Pass 2: stream it out.
  auto file = exporter::OutputFile::create(out);
  if (!file) return Err(file.error());
  {
    exporter::JsonWriter w(**file);
    Copier copy(w);
    size_t next = 0;
    if (auto s = write_process(top, 0, ctx, next, w, copy); !s) return Err(in + ": " + s.error());
    w.flush();
  }
  if (auto s = (*file)->finish(); !s) return s;
  if (ctx.local_paths) warn_sharing_once(out);
  return {};
}

Status symbolicate_profile(const std::string& in, const std::string& out,
                           const symbolizer::Options& options) {
  symbolizer::Symbolizer symbols(options);
  return symbolicate_profile(in, out, symbols);
}

}  // namespace fxprof::server
